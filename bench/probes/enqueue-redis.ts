/**
 * The enqueue path without HTTP: `LaneQueues` against a bare `Queue.addBulk`, on one redis-server.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/enqueue-redis.ts [--rounds R] [--singles M]
 *
 * Bulk: R rounds, each `enqueueMany` of 100 cards then `addBulk` of 100 jobs; the median of the
 * rounds' times and the Node CPU per round (process.cpuUsage). Then R/4 rounds of each alone, for
 * redis-server's CPU per round (INFO cpu, used_cpu_user + used_cpu_sys). Singles: M `enqueue`s one
 * after another, then M from 8 callers at once, with the Node CPU per card. What HTTP, JSON and
 * validation add on top is bench/enqueue.ts's to show.
 */
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { LaneConfigSchema } from '@lanes/contracts';
import { CardStore, LaneQueues, QUEUE_PREFIX } from '@lanes/queue';
import { startRedis } from '../../test/harness/index.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '200' }, singles: { type: 'string', default: '3000' } } });
const ROUNDS = Number(values.rounds);
const SINGLES = Number(values.singles);
const BULK = 100;
const WARMUP_ROUNDS = 20;
const CONCURRENT_CALLERS = 8;

const server = await startRedis();
const redis = new Redis(server.url, { maxRetriesPerRequest: null });
const lane = LaneConfigSchema.parse({ name: 'bench', agent: ['true'] });
const queues = new LaneQueues({ redis, store: new CardStore({ redis, now: Date.now }), lanes: [lane] });
const bare = new Queue('bare', { connection: redis, prefix: QUEUE_PREFIX });
const cardsFor = (prefix: string, round: number) => Array.from({ length: BULK }, (_, k) => ({ id: `${prefix}-${round}-${k}`, lane: lane.name, title: 'trivial', priority: 0 }));
const jobsFor = (prefix: string, round: number) => cardsFor(prefix, round).map((card) => ({ name: 'card', data: card, opts: { jobId: card.id } }));
const cpuMs = (u: NodeJS.CpuUsage) => (u.user + u.system) / 1000;
/** redis-server's CPU seconds so far (all its threads). */
const redisCpuS = async () => {
  const info = await redis.info('cpu');
  const field = (name: string) => Number(info.match(new RegExp(`${name}:([\\d.]+)`))?.[1] ?? Number.NaN);
  return field('used_cpu_user') + field('used_cpu_sys');
};
/** redis-server's CPU per round of `round`, over `rounds` rounds run alone. */
async function redisMsPerRound(rounds: number, round: (r: number) => Promise<unknown>): Promise<number> {
  const s0 = await redisCpuS();
  for (let r = 0; r < rounds; r++) await round(r);
  return (((await redisCpuS()) - s0) * 1000) / rounds;
}

try {
  for (let r = -WARMUP_ROUNDS; r < 0; r++) {
    await queues.enqueueMany(cardsFor('warm', r));
    await bare.addBulk(jobsFor('warm-bare', r));
  }
  const lanesMs: number[] = [];
  const bareMs: number[] = [];
  let lanesCpu = 0;
  let bareCpu = 0;
  for (let r = 0; r < ROUNDS; r++) {
    const u0 = process.cpuUsage();
    const t0 = performance.now();
    await queues.enqueueMany(cardsFor('lanes', r));
    const t1 = performance.now();
    const u1 = process.cpuUsage(u0);
    await bare.addBulk(jobsFor('bare', r));
    const t2 = performance.now();
    const u2 = process.cpuUsage(u0);
    lanesMs.push(t1 - t0);
    bareMs.push(t2 - t1);
    lanesCpu += cpuMs(u1);
    bareCpu += cpuMs(u2) - cpuMs(u1);
  }
  const alone = Math.max(1, Math.floor(ROUNDS / 4));
  const redisLanesMs = await redisMsPerRound(alone, (r) => queues.enqueueMany(cardsFor('lanes-alone', r)));
  const redisBareMs = await redisMsPerRound(alone, (r) => bare.addBulk(jobsFor('bare-alone', r)));
  const singles: Record<string, { perS: number; cpuMsPerCard: number }> = {};
  for (const callers of [1, CONCURRENT_CALLERS]) {
    const u0 = process.cpuUsage();
    const t0 = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: callers }, async () => {
        for (let i = next++; i < SINGLES; i = next++) await queues.enqueue({ id: `single-${callers}-${i}`, lane: lane.name, title: 'trivial', priority: 0 });
      }),
    );
    singles[callers] = { perS: (SINGLES / (performance.now() - t0)) * 1000, cpuMsPerCard: cpuMs(process.cpuUsage(u0)) / SINGLES };
  }
  const ratio = median(bareMs) / median(lanesMs);
  console.log(`\nenqueue without HTTP (${ROUNDS} rounds of ${BULK}; ${SINGLES} single enqueues per row)\n`);
  console.log('| measurement | lanes | bare `addBulk` | ratio |');
  console.log('|---|---|---|---|');
  console.log(`| ${BULK} cards, median of the rounds | ${median(lanesMs).toFixed(2)} ms | ${median(bareMs).toFixed(2)} ms | ${ratio.toFixed(2)}× |`);
  console.log(`| Node CPU per ${BULK} | ${(lanesCpu / ROUNDS).toFixed(2)} ms | ${(bareCpu / ROUNDS).toFixed(2)} ms | |`);
  console.log(`| redis-server CPU per ${BULK} (INFO cpu, rounds run alone) | ${redisLanesMs.toFixed(2)} ms | ${redisBareMs.toFixed(2)} ms | |`);
  for (const [callers, s] of Object.entries(singles)) {
    console.log(`| single \`enqueue\`, ${callers} caller(s) | ${s.perS.toFixed(0)} cards/s, ${s.cpuMsPerCard.toFixed(3)} ms CPU per card | | |`);
  }
  console.log(
    `BENCH_JSON ${JSON.stringify({
      bench: 'enqueue-redis',
      rounds: ROUNDS,
      bulkRatioMedian: Number(ratio.toFixed(3)),
      lanesBulkMs: Number(median(lanesMs).toFixed(2)),
      bareBulkMs: Number(median(bareMs).toFixed(2)),
      lanesCpuMs: Number((lanesCpu / ROUNDS).toFixed(2)),
      bareCpuMs: Number((bareCpu / ROUNDS).toFixed(2)),
      redisLanesMs: Number(redisLanesMs.toFixed(2)),
      redisBareMs: Number(redisBareMs.toFixed(2)),
      singlePerS: Number(singles[1]!.perS.toFixed(0)),
      singleCpuMs: Number(singles[1]!.cpuMsPerCard.toFixed(3)),
      concurrentPerS: Number(singles[CONCURRENT_CALLERS]!.perS.toFixed(0)),
      concurrentCpuMs: Number(singles[CONCURRENT_CALLERS]!.cpuMsPerCard.toFixed(3)),
    })}`,
  );
} finally {
  await queues.close();
  await bare.close();
  redis.disconnect();
  await server.stop();
}
