/**
 * Whether a burst's slots would run cards sooner if the lane began to grow sooner: burst.ts's lanes
 * round (a fresh stack, a lane at zero sandboxes, C cards) with the cards in one POST, alternated
 * round by round with the same cards in two POSTs sent at once, the first of only N cards. The
 * small one's enqueue script ends first, so the worker fetches and grows from it while the large
 * one's still runs: what a "demand hint" from the API before the enqueue could win at most.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-split.ts [--max-slots N] [--cards C] [--rounds R]
 */
import { Agent } from 'node:http';
import { parseArgs } from 'node:util';
import { startRedis } from '../../test/harness/index.js';
import { burstLaneRound } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '8' }, cards: { type: 'string', default: '200' }, rounds: { type: 'string', default: '8' } } });
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-burst-split-', 3_000);
const http = new Agent({ keepAlive: true });
try {
  const one: number[] = [];
  const split: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const posts = round % 2 === 0 ? undefined : [N, CARDS - N];
    const ms = await burstLaneRound({ redisUrl: redis.url, stamps, http, round, slots: N, cards: CARDS, ...(posts ? { posts } : {}) });
    (posts ? split : one).push(ms);
    console.error(`round ${round + 1}/${ROUNDS}: ${posts ? `POSTs of ${N} and ${CARDS - N}` : `one POST of ${CARDS}`}: ${ms.toFixed(0)} ms`);
  }
  console.log(
    `\nburst split (${N} slots, ${CARDS} cards, ${ROUNDS} rounds alternated), POST → every slot running a card, median: one POST ${median(one).toFixed(0)} ms (${one.map((x) => x.toFixed(0)).join(', ')}); the first ${N} in a POST of their own ${median(split).toFixed(0)} ms (${split.map((x) => x.toFixed(0)).join(', ')}): ${(median(split) / median(one)).toFixed(2)}×`,
  );
} finally {
  http.destroy();
  await redis.stop();
  stamps.remove();
}
