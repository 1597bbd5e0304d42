/**
 * Part of the benches: one lanes round of a burst, as bench/burst.ts runs it. A fresh stack (API,
 * worker, supervisor; `lanes up`'s heartbeat) in a process of its own with one lane, `minSlots: 0`,
 * `maxSlots`/`slots` N, on local sandboxes; waits until `GET /v1/lanes` shows no live sandbox and
 * the slot scaler's cooldown since boot has passed; then posts the cards and answers the time from
 * the first POST's start until N different sandboxes have each started a card.
 *
 * `warmCards` > 0: the stack has a second lane of the same shape whose agent is `true`, and runs
 * that many quick cards through it first (sandboxes made, canaries, moves, the POST's validation: the
 * code a running stack has already used), then lets those sandboxes go, as a stack that has been up
 * meets a burst.
 * Used by burst.ts, probes/burst-split.ts and probes/burst-cpu.ts.
 */
import type { Agent } from 'node:http';
import { join } from 'node:path';
import { defaults } from '@lanes/contracts';
import { apiClient, waitFor } from '../../test/harness/index.js';
import { postJson } from './enqueue-client.js';
import { startStackProcess } from './stack-client.js';
import type { StampAgent } from './stamp-agent.js';

/** A round starts only once the boot's slot change is older than the scaler's cooldown: a burst finds a settled lane. */
export const BURST_SETTLE_MS = defaults.DEFAULT_SLOT_SCALE_COOLDOWN_MS + 500;
/** The idle slot the worker boots with lets its sandbox go this soon, so the lane is at zero sandboxes before the burst. */
const IDLE_RELEASE_MS = 200;
const POLL_MS = 5;
/** How many quick cards warm a stack by default: two per slot, so every slot's path has run. */
export const defaultWarmCards = (slots: number): number => 2 * slots;

const wallMs = () => performance.timeOrigin + performance.now();

/** Waits until `n` different sandboxes have stamped cards of `prefix` since `offset`; answers the time of the n-th one's first stamp. */
export async function nthSandboxAt(stamps: StampAgent, offset: number, n: number, prefix: string): Promise<number> {
  return waitFor(
    `${n} sandboxes running ${prefix} cards`,
    async () => {
      const first = stamps.firstBySandbox(offset, prefix);
      return first.size >= n ? Math.max(...[...first.values()].map((s) => s.at)) : undefined;
    },
    { intervalMs: POLL_MS, timeoutMs: 120_000 },
  );
}

/**
 * Waits until no slot of the stack shows a live sandbox, then until BURST_SETTLE_MS have passed
 * since `from` (default: the moment it found none), so a burst finds its lane at zero sandboxes and
 * past the scaler's cooldown.
 */
export async function settleAtZero(api: Pick<ReturnType<typeof apiClient>, 'lanes'>, from?: number): Promise<void> {
  await waitFor('every lane at zero live sandboxes', async () => (await api.lanes()).flatMap((l) => l.slots).every((s) => s.sandbox?.state !== 'live') || undefined, {
    intervalMs: 50,
    timeoutMs: 60_000,
  });
  const wait = BURST_SETTLE_MS - (performance.now() - (from ?? performance.now()));
  if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
}

export interface BurstLaneRound {
  redisUrl: string;
  stamps: StampAgent;
  http: Agent;
  /** Names the lane, the cards (`l<round>-<i>`) and the stack's sandbox directory. */
  round: number;
  slots: number;
  cards: number;
  /** The cards go in POSTs of these sizes, all sent at once (default: one POST of every card). */
  posts?: readonly number[];
  /** Quick cards run through a second lane first, so the burst meets code that has run once (default 0: a fresh stack). */
  warmCards?: number;
  /** Called with the stack's pid just before the POST, once it is answered, and once every slot runs a card (for CPU readings). */
  onMeasure?: (phase: 'before' | 'posted' | 'after', stackPid: number) => void;
}

/** One burst on a fresh stack whose lane idles at zero sandboxes: ms from the POST until every slot runs a card. */
export async function burstLaneRound(o: BurstLaneRound): Promise<number> {
  const warmCards = o.warmCards ?? 0;
  const lane = `burst-${o.round}`;
  const warmLane = `warm-${o.round}`;
  const shape = { slots: o.slots, minSlots: 0, maxSlots: o.slots, idleReleaseMs: IDLE_RELEASE_MS, killGraceMs: 100 };
  const stack = await startStackProcess({
    redisUrl: o.redisUrl,
    lanes: [{ name: lane, agent: ['bash', o.stamps.agent], ...shape }, ...(warmCards > 0 ? [{ name: warmLane, agent: ['true'], ...shape }] : [])],
    parts: { api: true, worker: true, supervisor: true },
    provider: 'local',
    heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
    sandboxDir: join(o.stamps.dir, `stack-${o.round}`),
  });
  try {
    const api = apiClient(stack.url!);
    const bootAt = performance.now();
    if (warmCards > 0) {
      const warm = Array.from({ length: warmCards }, (_, i) => ({ id: `w${o.round}-${i}`, lane: warmLane, title: 'warm' }));
      const res = await postJson(o.http, stack.url!, '/v1/cards', { cards: warm });
      if (res.status >= 300) throw new Error(`POST /v1/cards (warm-up): ${res.status} ${res.text}`);
      for (const { id } of warm) await waitFor(`${id} done`, async () => (await api.card(id)).state === 'done' || undefined, { intervalMs: 50, timeoutMs: 60_000 });
    }
    // The burst lane's scaler cooldown runs from the boot; after a warm-up the same pause lets the
    // warm lane's sandboxes end and the box go quiet before the POST.
    await settleAtZero(api, warmCards > 0 ? undefined : bootAt);
    const offset = o.stamps.offset();
    const cards = Array.from({ length: o.cards }, (_, i) => ({ id: `l${o.round}-${i}`, lane, title: 'burst' }));
    const batches: Array<typeof cards> = [];
    for (let from = 0, k = 0; from < cards.length; k++) {
      const size = o.posts?.[k] ?? cards.length - from;
      batches.push(cards.slice(from, from + size));
      from += size;
    }
    o.onMeasure?.('before', stack.pid);
    const t0 = wallMs();
    const replies = await Promise.all(batches.map((batch) => postJson(o.http, stack.url!, '/v1/cards', { cards: batch })));
    o.onMeasure?.('posted', stack.pid);
    for (const res of replies) if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    const at = await nthSandboxAt(o.stamps, offset, o.slots, `l${o.round}-`);
    o.onMeasure?.('after', stack.pid);
    return at - t0;
  } finally {
    await stack.stop();
  }
}
