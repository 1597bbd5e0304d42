/**
 * Part of the benches: burst.ts's baseline, the local provider alone making N sandboxes at once and
 * running the stamping agent once in each as soon as it exists; timed from the first create until
 * the N-th stamp.
 *
 * `providerRound` runs it in the caller's process, on a provider kept across rounds (its code, and
 * its root spawner, up since a first round), as a stack that has been up keeps its own.
 * `freshProviderRound` runs it in a process forked for the round (this file is its entry), which
 * made one sandbox, ran a command in it and ended it as it started, as a fresh stack's boot slot
 * does with its canary (its root spawner is up): the baseline a fresh stack is held to, whose code
 * for cards first runs at the burst's POST, so that neither side is timed warm against the other
 * cold.
 */
import { fork } from 'node:child_process';
import { join } from 'node:path';
import { createLocalProvider, detectIsolation, type LocalSandboxProvider, type SandboxHandle } from '@lanes/sandbox';
import { BURST_SETTLE_MS, nthSandboxAt } from './burst-lane.js';
import type { StampAgent } from './stamp-agent.js';

const wallMs = () => performance.timeOrigin + performance.now();

interface Burst {
  /** The sandboxes' base directory. */
  baseDir: string;
  /** `bash <agent>`: the stamping agent. */
  agent: string;
  slots: number;
  /** Names the cards: `<idPrefix><i>`. */
  idPrefix: string;
}

const newProvider = (baseDir: string) => createLocalProvider({ baseDir, isolation: detectIsolation() });

/**
 * Makes the sandboxes with `provider` and runs the agent in each; calls `started` with the wall time
 * of the first create; ends them once every agent has ended. The provider outlives the round, as a
 * stack's does (and its root spawner with it): its owner closes it.
 */
async function burst(b: Burst, provider: LocalSandboxProvider, started: (t0: number) => void): Promise<void> {
  const handles: SandboxHandle[] = [];
  try {
    started(wallMs());
    await Promise.all(
      Array.from({ length: b.slots }, async (_, i) => {
        const h = await provider.create({ image: 'local', tags: { lane: 'burst', slot: String(i), worker: 'bench' } });
        handles.push(h);
        const id = `${b.idPrefix}${i}`;
        await h.exec(['bash', b.agent], { env: { LANES_CARD_ID: id, LANES_CARD_FILE: `${h.workdir}/cards/${id}/card.json` } });
      }),
    );
  } finally {
    await Promise.all(handles.map((h) => h.terminate()));
  }
}

/** The warm baseline's provider, kept by the caller across its rounds; close it after the last. */
export const warmProvider = (stamps: StampAgent): LocalSandboxProvider => newProvider(join(stamps.dir, 'provider'));

/** The provider alone in this process, one kept across rounds (warmProvider): ms from the first create until the N-th sandbox's agent stamped. */
export async function providerRound(stamps: StampAgent, slots: number, round: number, provider: LocalSandboxProvider): Promise<number> {
  const idPrefix = `p${round}-`;
  const offset = stamps.offset();
  let t0 = Number.NaN;
  const b: Burst = { baseDir: provider.baseDir, agent: stamps.agent, slots, idPrefix };
  const done = burst(b, provider, (at) => {
    t0 = at;
  });
  const at = await nthSandboxAt(stamps, offset, slots, idPrefix);
  await done;
  return at - t0;
}

/** The forked process's first argument: this file is its entry. */
const FRESH_ARG = '--fresh-provider-round';

/** What the forked side says, each field named apart from tsx's own messages on the same IPC channel (`{ ok, ms }`). */
type FromFresh = { freshReady?: true; freshT0?: number; freshDone?: true; error?: string };

/**
 * The provider alone in a process of its own, timed once it has been up as long as a burst's stack
 * before its POST (BURST_SETTLE_MS): ms from its first create until the N-th sandbox's agent stamped.
 */
export async function freshProviderRound(stamps: StampAgent, slots: number, round: number): Promise<number> {
  const idPrefix = `f${round}-`;
  const b: Burst = { baseDir: join(stamps.dir, `fresh-provider-${round}`), agent: stamps.agent, slots, idPrefix };
  const child = fork(new URL(import.meta.url).pathname, [FRESH_ARG, JSON.stringify(b)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const next = <T>(pick: (m: FromFresh) => T | undefined) =>
    new Promise<T>((resolve, reject) => {
      const on = (m: unknown) => {
        const v = typeof m === 'object' && m !== null ? pick(m as FromFresh) : undefined;
        if (v === undefined) return;
        child.off('message', on);
        resolve(v);
      };
      child.on('message', on);
      void exited.then((code) => reject(new Error(`the fresh provider's process exited ${code} before it answered`)));
    });
  try {
    await next((m) => m.freshReady);
    await new Promise((resolve) => setTimeout(resolve, BURST_SETTLE_MS));
    const offset = stamps.offset();
    const t0 = next((m) => m.freshT0);
    const done = next((m) => (m.freshDone ? m : undefined));
    // Awaited below; a process gone early must not be an unhandled rejection meanwhile.
    t0.catch(() => undefined);
    done.catch(() => undefined);
    child.send('go');
    const at = await nthSandboxAt(stamps, offset, slots, idPrefix);
    const { error } = await done;
    if (error) throw new Error(`the fresh provider's round failed: ${error}`);
    return at - (await t0);
  } finally {
    if (child.connected) child.disconnect();
    await exited;
  }
}

// The forked side: one sandbox made, run once (the stack's canary) and ended as it starts, as a
// stack's boot slot does (so its root spawner is up, as the stack's is), then one burst on the
// parent's word, then gone.
if (process.send && process.argv[2] === FRESH_ARG) {
  const b = JSON.parse(process.argv[3] ?? '') as Burst;
  const send = (m: FromFresh) => new Promise<void>((resolve) => process.send!(m, () => resolve()));
  const provider = newProvider(b.baseDir);
  const boot = await provider.create({ image: 'local', tags: { lane: 'burst', slot: 'boot', worker: 'bench' } });
  await boot.exec(['echo', 'boot']);
  await boot.terminate();
  process.once('message', () => {
    void burst(b, provider, (t0) => void send({ freshT0: t0 }))
      .finally(() => provider.close())
      .then(
        () => send({ freshDone: true }),
        (err: unknown) => send({ freshDone: true, error: String(err) }),
      )
      .finally(() => process.disconnect());
  });
  await send({ freshReady: true });
}
