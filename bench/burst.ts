/**
 * A burst on a lane that idles at zero sandboxes: how long until every one of its N slots runs a
 * card, beside the provider's own time to make N sandboxes and run the agent in each, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/burst.ts [--max-slots N] [--cards C] [--rounds R] [--work-ms W] [--stacks fresh,warm]
 *   # defaults 8, 200, 5, 3000, both stacks
 *
 * Lanes (bench/support/burst-lane.ts): each round starts a fresh stack (API, worker, supervisor;
 * `lanes up`'s heartbeat) in a process of its own (bench/support/stack-process.ts) with one lane, `minSlots: 0`, `maxSlots`/`slots` N,
 * on local sandboxes; waits until `GET /v1/lanes` shows no live sandbox and the slot scaler's
 * cooldown since boot has passed; then posts C cards in one `POST {cards:[…]}` and times until N
 * different sandboxes have each started a card. The agent's first act stamps `$EPOCHREALTIME`
 * and its card file's path (which names the sandbox's workdir); then it works W ms, so a card
 * holds its slot while the others grow. Two stacks are timed, each round: a fresh one, whose code
 * first runs at the POST (a stack's first burst after it starts), and a warm one, which first ran
 * 2N quick cards on a second lane and let those sandboxes go (a stack that has been up meets a
 * burst; burst-lane.ts): the baseline is warmed in this process before it is timed, as the
 * method asks of both sides.
 *
 * Baseline, alternated round by round with the lanes rounds (the order rotated every round): the
 * local provider alone in this process makes N sandboxes at once and runs the same agent once in
 * each as soon as it exists; timed from the first create until the N-th stamp.
 *
 * Target (issue 29): all N slots run cards within 1.3× the provider's own time (medians of rounds),
 * for each stack timed.
 */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalProvider, detectIsolation, type SandboxHandle } from '@lanes/sandbox';
import { startRedis } from '../test/harness/index.js';
import { burstLaneRound, nthSandboxAt } from './support/burst-lane.js';
import { makeStampAgent } from './support/stamp-agent.js';
import { median } from './support/stats.js';

const { values } = parseArgs({
  options: {
    'max-slots': { type: 'string', default: '8' },
    cards: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '5' },
    'work-ms': { type: 'string', default: '3000' },
    stacks: { type: 'string', default: 'fresh,warm' },
  },
});
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const WORK_MS = Number(values['work-ms']);
type Stack = 'fresh' | 'warm';
type Side = 'provider' | Stack;
const STACKS = values.stacks.split(',').map((s): Stack => {
  const stack = s.trim();
  if (stack !== 'fresh' && stack !== 'warm') throw new Error(`--stacks: "${stack}" is neither fresh nor warm`);
  return stack;
});
const SIDES: Side[] = ['provider', ...STACKS];
const TARGET = 1.3;
const wallMs = () => performance.timeOrigin + performance.now();

const redis = await startRedis();
const stamps = makeStampAgent('lanes-bench-burst-', WORK_MS);
const { dir, agent } = stamps;
const isolation = detectIsolation();

/** The provider alone: N sandboxes at once, the agent once in each as soon as it exists. */
async function providerRound(r: number): Promise<number> {
  const provider = createLocalProvider({ baseDir: join(dir, `provider-${r}`), isolation });
  const offset = stamps.offset();
  const handles: SandboxHandle[] = [];
  try {
    const t0 = wallMs();
    const runs = Array.from({ length: N }, async (_, i) => {
      const h = await provider.create({ image: 'local', tags: { lane: 'burst', slot: String(i), worker: 'bench' } });
      handles.push(h);
      await h.exec(['bash', agent], { env: { LANES_CARD_ID: `p${r}-${i}`, LANES_CARD_FILE: `${h.workdir}/cards/p${r}-${i}/card.json` } });
    });
    const at = await nthSandboxAt(stamps, offset, N, `p${r}-`);
    await Promise.all(runs);
    return at - t0;
  } finally {
    await Promise.all(handles.map((h) => h.terminate()));
    await provider.close();
  }
}

/** A stack (fresh, or warm) whose lane idles at zero sandboxes, then a burst of CARDS in one POST. */
// The round number names the lane and its cards in the shared Redis: a warm stack's are offset past the fresh ones'.
const lanesRound = (round: number, http: Agent, stack: Stack) =>
  burstLaneRound({ redisUrl: redis.url, stamps, http, round: stack === 'warm' ? ROUNDS + round : round, slots: N, cards: CARDS, warm: stack === 'warm' });

const http = new Agent({ keepAlive: true });
try {
  const rounds: Array<Partial<Record<Side, number>>> = [];
  // Warm-up, untimed: the page cache, and the provider's code in this process. A lanes stack is
  // warmed (or not) inside its own round: each round forks a new one.
  await providerRound(-1);
  for (let r = 0; r < ROUNDS; r++) {
    const round: Partial<Record<Side, number>> = {};
    // The sides' order rotates by one each round, so load drift hits each side alike.
    const order = SIDES.map((_, i) => SIDES[(i + r) % SIDES.length]!);
    for (const side of order) round[side] = side === 'provider' ? await providerRound(r) : await lanesRound(r, http, side);
    rounds.push(round);
    console.error(`round ${r + 1}/${ROUNDS}: ${SIDES.map((side) => `${side} ${round[side]!.toFixed(0)} ms`).join(', ')}`);
  }
  const med = (side: Side) => median(rounds.map((x) => x[side]!));
  const p = med('provider');
  const stacks = STACKS.map((stack) => {
    const lanesMs = med(stack);
    return { stack, lanesMs, ratio: lanesMs / p };
  });
  const load = loadavg().map((x) => Number(x.toFixed(2)));
  console.log(`\nburst benchmark (local provider, ${isolation}; minSlots 0, maxSlots ${N}; ${CARDS} cards in one POST; ${ROUNDS} rounds; load average ${load.join(' ')})\n`);
  console.log('| measurement | lanes | provider alone | ratio | target |');
  console.log('|---|---|---|---|---|');
  for (const { stack, lanesMs, ratio } of stacks) {
    console.log(
      `| a burst of ${CARDS} on a lane at 0 sandboxes of a ${stack} stack → all ${N} slots running cards; the provider: ${N} sandboxes made at once, each running the agent (median of ${ROUNDS} rounds) | ${lanesMs.toFixed(0)} ms | ${p.toFixed(0)} ms | ${ratio.toFixed(2)}× | ≤ ${TARGET}× ${ratio <= TARGET ? '✔' : '✘'} |`,
    );
  }
  console.log(`\nper round (${SIDES.join(' / ')}): ${rounds.map((x, i) => `${i + 1}: ${SIDES.map((side) => x[side]!.toFixed(0)).join(' / ')} ms`).join('; ')}`);
  console.log(
    `BENCH_JSON ${JSON.stringify({
      bench: 'burst',
      maxSlots: N,
      cards: CARDS,
      rounds: ROUNDS,
      isolation,
      providerAloneMs: Math.round(p),
      stacks: Object.fromEntries(stacks.map((x) => [x.stack, { lanesMs: Math.round(x.lanesMs), ratio: Number(x.ratio.toFixed(3)) }])),
      roundMs: Object.fromEntries(SIDES.map((side) => [side, rounds.map((x) => Math.round(x[side]!))])),
      loadAverage: load,
    })}`,
  );
} finally {
  http.destroy();
  await redis.stop();
  stamps.remove();
}
