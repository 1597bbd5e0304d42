/**
 * What a demand hint could win at most: a lanes burst where, as the POST goes out, every slot the
 * lane may have starts its sandbox (a hint from the API that reached the worker at once, in
 * process, before the cards are validated or enqueued), alternated round by round with the same
 * burst without one. The stack is in this process, with one lane at zero sandboxes
 * (`minSlots: 0`); each side is timed from the POST until N sandboxes run agents.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-hint.ts [--max-slots N] [--cards C] [--rounds R]   # defaults 2, 200, 8 (each side)
 *
 * The hint reaches into the lane worker (its slots' ready() and its private addSlot): a probe's
 * stand-in for a feature lanes does not have, so no figure of it describes lanes as it is.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import { startRedis, startTestStack } from '../../test/harness/index.js';
import { nthSandboxAt, settleAtZero } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '2' }, cards: { type: 'string', default: '200' }, rounds: { type: 'string', default: '8' } } });
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);

/** The parts of a LaneWorker the hint touches. */
interface HintedLane {
  addSlot: (reason: string) => void;
  pool: { size: number; slots: ReadonlyArray<{ ready: () => Promise<unknown> }> };
}

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-burst-hint-', 3_000);
const ms = { hint: [] as number[], none: [] as number[] };
try {
  for (let r = 0; r < 2 * ROUNDS; r++) {
    const side = r % 2 === 0 ? 'hint' : 'none';
    const lane = `hint-${r}`;
    const t = await startTestStack(redis.url, [{ name: lane, slots: N, minSlots: 0, maxSlots: N, agent: ['bash', stamps.agent], idleReleaseMs: 200, killGraceMs: 100 }], {
      sandboxDir: join(stamps.dir, `stack-${r}`),
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
    });
    try {
      await settleAtZero(t.api);
      const worker = t.stack.worker as unknown as { lanes: ReadonlyMap<string, HintedLane> } | undefined;
      const lw = worker?.lanes.get(lane);
      if (!lw) throw new Error(`no lane worker for ${lane}`);
      const offset = stamps.offset();
      const t0 = performance.timeOrigin + performance.now();
      const posted = t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `h${r}-${i}`, lane, title: 'burst' })) });
      if (side === 'hint') {
        // The slot the worker booted with has let its sandbox go but stays in the pool: it starts one too.
        for (const slot of lw.pool.slots) void slot.ready();
        while (lw.pool.size < N) lw.addSlot('demand hint (probe)');
      }
      const res = await posted;
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const last = await nthSandboxAt(stamps, offset, N, `h${r}-`);
      ms[side].push(last - t0);
      console.error(`round ${r + 1}/${2 * ROUNDS}: ${side === 'hint' ? 'hinted' : 'no hint'} ${(last - t0).toFixed(0)} ms`);
    } finally {
      await t.stop();
    }
  }
  const line = (side: 'hint' | 'none') =>
    `| ${side === 'hint' ? 'every slot starts its sandbox as the POST goes out' : 'no hint'} | ${median(ms[side]).toFixed(0)} ms | ${ms[side].map((x) => x.toFixed(0)).join(', ')} |`;
  console.log(`\nburst hint (${N} slots, ${CARDS} cards in one POST, ${ROUNDS} rounds each way, alternated; node ${process.version})\n`);
  console.log('| side | POST → every slot running a card, median | rounds |');
  console.log('|---|---|---|');
  console.log(line('hint'));
  console.log(line('none'));
} finally {
  await redis.stop();
  stamps.remove();
}
