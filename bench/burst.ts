/**
 * A burst on a lane that idles at zero sandboxes: how long until every one of its N slots runs a
 * card, beside the provider's own time to make N sandboxes and run the agent in each, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/burst.ts [--max-slots N] [--cards C] [--rounds R] [--work-ms W]
 *   # defaults 8, 200, 5, 3000
 *
 * Lanes (bench/support/burst-lane.ts): each round starts a fresh stack (API, worker, supervisor;
 * `lanes up`'s heartbeat) in a process of its own (bench/support/stack-process.ts) with one lane, `minSlots: 0`, `maxSlots`/`slots` N,
 * on local sandboxes; waits until `GET /v1/lanes` shows no live sandbox and the slot scaler's
 * cooldown since boot has passed; then posts C cards in one `POST {cards:[…]}` and times until N
 * different sandboxes have each started a card. The agent's first act stamps `$EPOCHREALTIME`
 * and its card file's path (which names the sandbox's workdir); then it works W ms, so a card
 * holds its slot while the others grow.
 *
 * Baseline, alternated round by round with the lanes round (the order swapped every round): the
 * local provider alone in this process makes N sandboxes at once and runs the same agent once in
 * each as soon as it exists; timed from the first create until the N-th stamp.
 *
 * Target (issue 29): all N slots run cards within 1.3× the provider's own time (medians of rounds).
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
  },
});
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const WORK_MS = Number(values['work-ms']);
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

/** A fresh stack whose lane idles at zero sandboxes, then a burst of CARDS in one POST. */
const lanesRound = (round: number, http: Agent) => burstLaneRound({ redisUrl: redis.url, stamps, http, round, slots: N, cards: CARDS });

const http = new Agent({ keepAlive: true });
try {
  const rounds: Array<{ lanesMs: number; providerMs: number }> = [];
  // Warm-up, untimed: the page cache, and the provider's code in this process. No stack is warmed:
  // each lanes round forks a fresh one, whose code first runs at the POST, as in a stack's first
  // burst after it starts (probes/burst-cpu.ts --warm times stacks that have run cards first).
  await providerRound(-1);
  for (let r = 0; r < ROUNDS; r++) {
    let lanesMs: number;
    let providerMs: number;
    if (r % 2 === 0) {
      lanesMs = await lanesRound(r, http);
      providerMs = await providerRound(r);
    } else {
      providerMs = await providerRound(r);
      lanesMs = await lanesRound(r, http);
    }
    rounds.push({ lanesMs, providerMs });
    console.error(`round ${r + 1}/${ROUNDS}: lanes ${lanesMs.toFixed(0)} ms, provider alone ${providerMs.toFixed(0)} ms (${(lanesMs / providerMs).toFixed(2)}×)`);
  }
  const l = median(rounds.map((x) => x.lanesMs));
  const p = median(rounds.map((x) => x.providerMs));
  const ratio = l / p;
  const load = loadavg().map((x) => Number(x.toFixed(2)));
  console.log(`\nburst benchmark (local provider, ${isolation}; minSlots 0, maxSlots ${N}; ${CARDS} cards in one POST; ${ROUNDS} rounds; load average ${load.join(' ')})\n`);
  console.log('| measurement | lanes | provider alone | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(
    `| a burst of ${CARDS} on a lane at 0 sandboxes → all ${N} slots running cards; the provider: ${N} sandboxes made at once, each running the agent (median of ${ROUNDS} rounds) | ${l.toFixed(0)} ms | ${p.toFixed(0)} ms | ${ratio.toFixed(2)}× | ≤ ${TARGET}× ${ratio <= TARGET ? '✔' : '✘'} |`,
  );
  console.log(`\nper round (lanes / provider alone): ${rounds.map((x, i) => `${i + 1}: ${x.lanesMs.toFixed(0)} / ${x.providerMs.toFixed(0)} ms`).join('; ')}`);
  console.log(
    `BENCH_JSON ${JSON.stringify({
      bench: 'burst',
      maxSlots: N,
      cards: CARDS,
      rounds: ROUNDS,
      isolation,
      lanesMs: Math.round(l),
      providerAloneMs: Math.round(p),
      ratio: Number(ratio.toFixed(3)),
      roundLanesMs: rounds.map((x) => Math.round(x.lanesMs)),
      roundProviderMs: rounds.map((x) => Math.round(x.providerMs)),
      loadAverage: load,
    })}`,
  );
} finally {
  http.destroy();
  await redis.stop();
  stamps.remove();
}
