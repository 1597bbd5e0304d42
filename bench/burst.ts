/**
 * A burst on a lane that idles at zero sandboxes: how long until every one of its N slots runs a
 * card, beside the provider's own time to make N sandboxes and run the agent in each, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/burst.ts [--max-slots N] [--cards C] [--rounds R] [--work-ms W] [--stacks fresh,warm] [--warm-cards K]
 *   # defaults 8, 200, 5, 3000, both stacks, 2N
 *
 * Lanes (bench/support/burst-lane.ts): each round starts a fresh stack (API, worker, supervisor;
 * `lanes up`'s heartbeat) in a process of its own (bench/support/stack-process.ts) with one lane, `minSlots: 0`, `maxSlots`/`slots` N,
 * on local sandboxes; waits until `GET /v1/lanes` shows no live sandbox and the slot scaler's
 * cooldown since boot has passed; then posts C cards in one `POST {cards:[…]}` and times until N
 * different sandboxes have each started a card. The agent's first act stamps `$EPOCHREALTIME`
 * and its card file's path (which names the sandbox's workdir); then it works W ms, so a card
 * holds its slot while the others grow. Two stacks are timed, each round: a fresh one, whose code
 * first runs at the POST (a stack's first burst after it starts), and a warm one, which first ran
 * K quick cards (default 2N) on a second lane and let those sandboxes go (a stack that has been up
 * meets a burst; burst-lane.ts).
 *
 * Baselines (bench/support/burst-provider.ts), alternated round by round with the lanes rounds (the
 * order rotated every round): the local provider alone makes N sandboxes at once and runs the same
 * agent once in each as soon as it exists; timed from the first create until the N-th stamp. The
 * warm stack is held to it in this process, on one provider kept across the rounds and warmed by an
 * untimed round; the fresh stack to it in a process forked for the round and up as long as a stack
 * before its POST, which made one sandbox, ran a command in it and ended it as it started (as the
 * stack's boot slot does with its canary). The method asks the same state of both sides.
 *
 * Target (issue 29): all N slots run cards within 1.3× the provider's own time (medians of rounds),
 * for each stack timed.
 */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { detectIsolation } from '@lanes/sandbox';
import { startRedis } from '../test/harness/index.js';
import { burstLaneRound, defaultWarmCards } from './support/burst-lane.js';
import { freshProviderRound, providerRound, warmProvider } from './support/burst-provider.js';
import { makeStampAgent } from './support/stamp-agent.js';
import { median } from './support/stats.js';

const { values } = parseArgs({
  options: {
    'max-slots': { type: 'string', default: '8' },
    cards: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '5' },
    'work-ms': { type: 'string', default: '3000' },
    stacks: { type: 'string', default: 'fresh,warm' },
    'warm-cards': { type: 'string' },
  },
});
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const WORK_MS = Number(values['work-ms']);
const WARM_CARDS = values['warm-cards'] === undefined ? defaultWarmCards(N) : Number(values['warm-cards']);
if (!Number.isInteger(WARM_CARDS) || WARM_CARDS < 1) throw new Error(`--warm-cards: "${values['warm-cards']}" is not a whole number of cards, 1 or more`);
type Stack = 'fresh' | 'warm';
/** `provider`: the provider alone in this process, warmed; `fresh-provider`: in a process forked for its round. */
type Side = 'provider' | 'fresh-provider' | Stack;
/** Each stack is held to the provider in the same state: warm code against warm, first run against first run. */
const BASELINE: Record<Stack, Side> = { warm: 'provider', fresh: 'fresh-provider' };
const STACKS = values.stacks.split(',').map((s): Stack => {
  const stack = s.trim();
  if (stack !== 'fresh' && stack !== 'warm') throw new Error(`--stacks: "${stack}" is neither fresh nor warm`);
  return stack;
});
/** The baselines the stacks timed need, each once. */
const BASELINES: Side[] = [...new Set(STACKS.map((stack) => BASELINE[stack]))];
const SIDES: Side[] = [...BASELINES, ...STACKS];
const TARGET = 1.3;

const redis = await startRedis();
const stamps = makeStampAgent('lanes-bench-burst-', WORK_MS);
const isolation = detectIsolation();
const provider = warmProvider(stamps);

/** A stack (fresh, or warm) whose lane idles at zero sandboxes, then a burst of CARDS in one POST. */
// The round number names the lane and its cards in the shared Redis: a warm stack's are offset past the fresh ones'.
const lanesRound = (round: number, http: Agent, stack: Stack) =>
  burstLaneRound({ redisUrl: redis.url, stamps, http, round: stack === 'warm' ? ROUNDS + round : round, slots: N, cards: CARDS, warmCards: stack === 'warm' ? WARM_CARDS : 0 });

const sideRound = (side: Side, r: number, http: Agent): Promise<number> =>
  side === 'provider' ? providerRound(stamps, N, r, provider) : side === 'fresh-provider' ? freshProviderRound(stamps, N, r) : lanesRound(r, http, side);

const http = new Agent({ keepAlive: true });
try {
  const rounds: Array<Partial<Record<Side, number>>> = [];
  // Warm-up, untimed: the page cache, and the provider's code in this process. A lanes stack is
  // warmed (or not) inside its own round, and a fresh provider's process is new each round.
  await providerRound(stamps, N, -1, provider);
  for (let r = 0; r < ROUNDS; r++) {
    const round: Partial<Record<Side, number>> = {};
    // The sides' order rotates by one each round, so load drift hits each side alike.
    const order = SIDES.map((_, i) => SIDES[(i + r) % SIDES.length]!);
    for (const side of order) round[side] = await sideRound(side, r, http);
    rounds.push(round);
    console.error(`round ${r + 1}/${ROUNDS}: ${SIDES.map((side) => `${side} ${round[side]!.toFixed(0)} ms`).join(', ')}`);
  }
  const med = (side: Side) => median(rounds.map((x) => x[side]!));
  const stacks = STACKS.map((stack) => {
    const lanesMs = med(stack);
    const providerMs = med(BASELINE[stack]);
    return { stack, lanesMs, providerMs, ratio: lanesMs / providerMs };
  });
  const load = loadavg().map((x) => Number(x.toFixed(2)));
  console.log(`\nburst benchmark (local provider, ${isolation}; minSlots 0, maxSlots ${N}; ${CARDS} cards in one POST; ${ROUNDS} rounds; load average ${load.join(' ')})\n`);
  console.log('| measurement | lanes | provider alone | ratio | target |');
  console.log('|---|---|---|---|---|');
  for (const { stack, lanesMs, providerMs, ratio } of stacks) {
    const lanes = stack === 'warm' ? `a warm stack (${WARM_CARDS} quick cards first)` : 'a fresh stack (its first cards)';
    const provider = stack === 'warm' ? 'in the bench process, warmed' : 'in a process of its own, its first sandboxes';
    console.log(
      `| a burst of ${CARDS} on a lane at 0 sandboxes of ${lanes} → all ${N} slots running cards; the provider ${provider}: ${N} sandboxes made at once, each running the agent (median of ${ROUNDS} rounds) | ${lanesMs.toFixed(0)} ms | ${providerMs.toFixed(0)} ms | ${ratio.toFixed(2)}× | ≤ ${TARGET}× ${ratio <= TARGET ? '✔' : '✘'} |`,
    );
  }
  console.log(`\nper round (${SIDES.join(' / ')}): ${rounds.map((x, i) => `${i + 1}: ${SIDES.map((side) => x[side]!.toFixed(0)).join(' / ')} ms`).join('; ')}`);
  console.log(
    `BENCH_JSON ${JSON.stringify({
      bench: 'burst',
      maxSlots: N,
      cards: CARDS,
      rounds: ROUNDS,
      warmCards: WARM_CARDS,
      isolation,
      providerMs: Object.fromEntries(BASELINES.map((side) => [side, Math.round(med(side))])),
      stacks: Object.fromEntries(stacks.map((x) => [x.stack, { lanesMs: Math.round(x.lanesMs), baseline: BASELINE[x.stack], ratio: Number(x.ratio.toFixed(3)) }])),
      roundMs: Object.fromEntries(SIDES.map((side) => [side, rounds.map((x) => Math.round(x[side]!))])),
      loadAverage: load,
    })}`,
  );
} finally {
  http.destroy();
  await provider.close();
  await redis.stop();
  stamps.remove();
}
