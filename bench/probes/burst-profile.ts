/**
 * Where a warm stack's main thread spends a burst: burst.ts's lanes round with the stack in this
 * process, warmed first by 2N quick cards on a second lane, and V8's CPU profiler running from the
 * POST until the N-th sandbox's agent stamps (samples after the stamp are cut off, and so is
 * the profiler's own start). Prints the busy time per round and the top self-time frames
 * over every round; writes each round's profile for cpuprofile-top.ts and cpuprofile-stalls.ts.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-profile.ts [--max-slots N] [--cards C] [--rounds R] [--out DIR] [--top T]   # defaults 8, 200, 4, a temp dir, 25
 *
 * The time a frame shows is the main thread's wall time in it, system calls included: a slow
 * `mkdir` shows as the native frame that made it, and so does a write that woke its reader and
 * gave it the CPU (the thread waits inside the call). burst-cpu.ts reads the CPU itself.
 */
import { Session } from 'node:inspector/promises';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import { startRedis, startTestStack, waitFor } from '../../test/harness/index.js';
import { defaultWarmCards, nthSandboxAt, settleAtZero } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';
import { frameLabel, type Profile } from './cpuprofile.js';

const { values } = parseArgs({
  options: {
    'max-slots': { type: 'string', default: '8' },
    cards: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '4' },
    out: { type: 'string' },
    top: { type: 'string', default: '25' },
  },
});
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const OUT = values.out ?? mkdtempSync(join(tmpdir(), 'lanes-burst-profile-'));

/** Monotonic µs, the clock V8's profile timestamps use. */
const monoUs = () => Number(process.hrtime.bigint() / 1000n);
const wallMs = () => performance.timeOrigin + performance.now();

/**
 * Drops the samples taken after `endUs` (monotonic µs), and the first one: its delta is the
 * profiler's own start (tens of ms charged to the inspector call that started it), not work.
 */
function cutAt(profile: Profile & { startTime: number }, endUs: number): Profile & { startTime: number } {
  let at = profile.startTime + (profile.timeDeltas[0] ?? 0);
  let keep = 1;
  while (keep < profile.samples.length && at + (profile.timeDeltas[keep] ?? 0) <= endUs) at += profile.timeDeltas[keep++] ?? 0;
  return {
    ...profile,
    startTime: profile.startTime + (profile.timeDeltas[0] ?? 0),
    samples: profile.samples.slice(1, keep),
    timeDeltas: profile.timeDeltas.slice(1, keep),
  };
}

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-burst-profile-', 3_000);
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: 100 });
const selfUs = new Map<string, number>();
const busyMs: number[] = [];
const lastAgentMs: number[] = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    const shape = { slots: N, minSlots: 0, maxSlots: N, idleReleaseMs: 200, killGraceMs: 100 };
    const lane = `profile-${r}`;
    const warmLane = `warm-${r}`;
    const t = await startTestStack(
      redis.url,
      [
        { name: lane, agent: ['bash', stamps.agent], ...shape },
        { name: warmLane, agent: ['true'], ...shape },
      ],
      {
        sandboxDir: join(stamps.dir, `stack-${r}`),
        heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
      },
    );
    try {
      const warm = Array.from({ length: defaultWarmCards(N) }, (_, i) => ({ id: `w${r}-${i}`, lane: warmLane, title: 'warm' }));
      await t.api.request('POST', '/v1/cards', { cards: warm });
      for (const { id } of warm) await waitFor(`${id} done`, async () => (await t.api.card(id)).state === 'done' || undefined, { intervalMs: 50, timeoutMs: 60_000 });
      await settleAtZero(t.api);
      const offset = stamps.offset();
      await session.post('Profiler.start');
      const t0 = wallMs();
      const res = await t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `p${r}-${i}`, lane, title: 'burst' })) });
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const last = await nthSandboxAt(stamps, offset, N, `p${r}-`);
      // The stamp's moment on the monotonic clock: it was read this long before now.
      const lastUs = monoUs() - Math.round((wallMs() - last) * 1000);
      const { profile } = (await session.post('Profiler.stop')) as unknown as { profile: Profile & { startTime: number } };
      const cut = cutAt(profile, lastUs);
      writeFileSync(join(OUT, `round-${r + 1}.cpuprofile`), JSON.stringify(cut));
      const byId = new Map(cut.nodes.map((n) => [n.id, n]));
      let busyUs = 0;
      cut.samples.forEach((id, i) => {
        const node = byId.get(id);
        const dt = cut.timeDeltas[i] ?? 0;
        if (!node || node.callFrame.functionName === '(idle)') return;
        busyUs += dt;
        const label = frameLabel(node);
        selfUs.set(label, (selfUs.get(label) ?? 0) + dt);
      });
      busyMs.push(busyUs / 1000);
      lastAgentMs.push(last - t0);
      console.error(`round ${r + 1}/${ROUNDS}: last agent ${(last - t0).toFixed(0)} ms, main thread busy ${(busyUs / 1000).toFixed(1)} ms`);
    } finally {
      await t.stop();
    }
  }
} finally {
  session.disconnect();
  await redis.stop();
  stamps.remove();
}
console.log(`\nburst profile (${N} slots, ${CARDS} cards in one POST, warm stacks in this process, ${ROUNDS} rounds; node ${process.version})`);
console.log(`medians: last agent ${median(lastAgentMs).toFixed(0)} ms, main thread busy ${median(busyMs).toFixed(1)} ms; profiles in ${OUT}\n`);
console.log('| self ms per round | function |');
console.log('|---|---|');
for (const [label, us] of [...selfUs].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top))) console.log(`| ${(us / 1000 / ROUNDS).toFixed(2)} | ${label} |`);
