/**
 * Enqueue rate through the API beside BullMQ's own `addBulk`, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/enqueue.ts [--rounds R] [--singles M] [--clients C]
 *
 * Targets (issue 10), each printed with its verdict: a bulk POST of 100 ≥ 0.7× `Queue.addBulk` of
 * 100 (aggregate and median of the rounds' ratios); a single-card POST ≥ 1,500 cards/s. The other
 * rows read those figures apart and have no target.
 *
 * The stack runs the API only (no worker, no supervisor), so the lane's cards stay queued and
 * nothing but the enqueue path touches Redis. Each round posts `{cards: [100 cards]}` to
 * `POST /v1/cards`, then (interleaved, so load drift hits both alike) `Queue.addBulk` of 100 jobs
 * carrying the same card objects on a bare queue of the same redis-server, and a POST of 100
 * prioritized cards (their jobs go to BullMQ's prioritized set, with its counter; lanes' enqueue
 * script writes both kinds, see libs/queue/src/bullmq-job-layout.ts). Then M single-card POSTs,
 * as a board posting cards one at a time would: one after another, and from C keep-alive clients at once.
 *
 * A third baseline is HTTP itself: a bare Fastify route that only hands the posted cards to
 * `addBulk` (or `add`), posted to by the same client (bench/support/bare-http.ts). It shows how much of the
 * gap to `addBulk` any HTTP API pays before it does anything of its own.
 *
 * The headline figures come from a client in a process of its own (bench/support/enqueue-client.ts, a
 * `node:http` keep-alive agent), as a board posts from elsewhere: the API's process spends its CPU
 * on the server only. The bench also prints the figures of a client inside the API's own process
 * (`fetch`, the test harness's client, and `node:http`), as it measured before: there the client's
 * CPU counts against the server (`fetch` costs about as much per request as the server's whole
 * handling of it; see bench/README.md).
 */
import { fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { CardSchema, LaneConfigSchema, defaults } from '@lanes/contracts';
import { QUEUE_PREFIX, jobOptions } from '@lanes/queue';
import { startRedis, startTestStack } from '../test/harness/index.js';
import { startBareHttp } from './support/bare-http.js';
import { runTask, type ClientReply, type ClientTask } from './support/enqueue-client.js';
import { median } from './support/stats.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '30' }, singles: { type: 'string', default: '2000' }, clients: { type: 'string', default: '8' } } });
const ROUNDS = Number(values.rounds);
const SINGLES = Number(values.singles);
const CLIENTS = Number(values.clients);
const BULK = 100;
const WARMUP_ROUNDS = 30;
/**
 * Single POSTs before the timed ones, to each server from each client, so no row pays for the JIT's
 * warm-up (with 200, the first rows ran at half the rate they reach a few thousand POSTs later).
 */
const WARMUP_SINGLES = 1000;
/** lanes' single POSTs and the bare route's alternate in this many chunks, so drift hits both alike. */
const SINGLE_CHUNKS = 5;
const LANE = 'bench';

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-enqueue-'));
const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
const result: Record<string, unknown> = { bulk: BULK, rounds: ROUNDS, singles: SINGLES, clients: CLIENTS };
// Forked with this process's execArgv, so it runs under tsx as this one does.
const child = fork(new URL('./support/enqueue-client.ts', import.meta.url).pathname, [], { stdio: 'inherit' });
/** The c-th of SINGLE_CHUNKS shares of SINGLES; the last takes the remainder. */
function chunkSize(c: number): number {
  const base = Math.floor(SINGLES / SINGLE_CHUNKS);
  return c < SINGLE_CHUNKS - 1 ? base : SINGLES - base * (SINGLE_CHUNKS - 1);
}
/** Runs one task in the client process and returns the milliseconds it measured there. */
function remote(task: ClientTask): Promise<number> {
  return new Promise((resolve, reject) => {
    child.once('message', (reply: ClientReply) => (reply.ok ? resolve(reply.ms) : reject(new Error(reply.error))));
    child.send(task);
  });
}
try {
  // The lane's open-card bound at its most: every posted card stays queued (no worker), and the run posts tens of thousands.
  const t = await startTestStack(redis.url, [{ name: LANE, slots: 1, agent: ['true'], maxOpenCards: defaults.MAX_OPEN_CARDS_LIMIT }], {
    sandboxDir: join(dir, 'stack'),
    parts: { api: true, worker: false, supervisor: false },
  });
  const bare = new Queue('bare', { connection: conn, prefix: QUEUE_PREFIX });
  // The second baseline adds the very jobs lanes adds: the same data and the same job options.
  const sameJobs = new Queue('bare-same-jobs', { connection: conn, prefix: QUEUE_PREFIX });
  const laneConfig = LaneConfigSchema.parse({ name: LANE, agent: ['true'] });
  const url = t.stack.url!;
  const bareHttp = await startBareHttp(redis.url, 'bare-http', QUEUE_PREFIX);
  const api = t.stack.api!;
  const cardsFor = (prefix: string, round: number, priority?: number) =>
    Array.from({ length: BULK }, (_, k) => ({ id: `${prefix}-${round}-${k}`, lane: LANE, title: 'trivial', ...(priority !== undefined ? { priority } : {}) }));
  const ms = {
    bareHttpBulk: 0,
    bareHttpSeq: 0,
    bareHttpConc: 0,
    remoteBulk: 0,
    remotePrioritizedBulk: 0,
    localBulk: 0,
    bare: 0,
    sameJobs: 0,
    direct: 0,
    remoteSeq: 0,
    remoteConc: 0,
    fetchSeq: 0,
    localSeq: 0,
    localConc: 0,
  };
  /** Per round, addBulk's time over the API's: load that drifts over the run moves both sides of one round alike. */
  const roundRatios: number[] = [];
  const sameJobsRoundRatios: number[] = [];
  /** Per round, the bare HTTP route's time over the API's. */
  const bareHttpRoundRatios: number[] = [];
  const agent = new Agent({ keepAlive: true });
  try {
    for (let r = -WARMUP_ROUNDS; r < ROUNDS; r++) {
      const remoteMs = await remote({ kind: 'bulk', url, cards: cardsFor('remote', r) });
      // Prioritized cards: their jobs go to the prioritized set, with its counter.
      const prioritizedMs = await remote({ kind: 'bulk', url, cards: cardsFor('remote-prio', r, 1) });
      const bareHttpMs = await remote({ kind: 'bulk', url: bareHttp.url, cards: cardsFor('bare-http', r) });
      const a0 = performance.now();
      const res = await t.api.request('POST', '/v1/cards', { cards: cardsFor('api', r) });
      const a1 = performance.now();
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const jobs = cardsFor('bare', r).map((card) => ({ name: 'card', data: card, opts: { jobId: card.id } }));
      const sameJobsJobs = cardsFor('same', r).map((input) => {
        const card = CardSchema.parse(input);
        return { name: LANE, data: card, opts: jobOptions(card, laneConfig) };
      });
      const direct = cardsFor('direct', r).map((input) => CardSchema.parse(input));
      const b0 = performance.now();
      await bare.addBulk(jobs);
      const b1 = performance.now();
      await sameJobs.addBulk(sameJobsJobs);
      const b2 = performance.now();
      // The API's own enqueueMany, called in its process on its connection: the POST without HTTP.
      await api.queues.enqueueMany(direct);
      const b3 = performance.now();
      if (r >= 0) {
        roundRatios.push((b1 - b0) / remoteMs);
        sameJobsRoundRatios.push((b2 - b1) / remoteMs);
        bareHttpRoundRatios.push(bareHttpMs / remoteMs);
        ms.bareHttpBulk += bareHttpMs;
        ms.sameJobs += b2 - b1;
        ms.direct += b3 - b2;
        ms.remoteBulk += remoteMs;
        ms.remotePrioritizedBulk += prioritizedMs;
        ms.localBulk += a1 - a0;
        ms.bare += b1 - b0;
      }
    }
    await remote({ kind: 'singles', url, lane: LANE, prefix: 'remote-warm', count: WARMUP_SINGLES, clients: 1 });
    await runTask(agent, { kind: 'singles', url, lane: LANE, prefix: 'local-warm', count: WARMUP_SINGLES, clients: 1 });
    await remote({ kind: 'singles', url: bareHttp.url, lane: LANE, prefix: 'bare-http-warm', count: WARMUP_SINGLES, clients: 1 });
    for (let c = 0; c < SINGLE_CHUNKS; c++) {
      const count = chunkSize(c);
      ms.remoteSeq += await remote({ kind: 'singles', url, lane: LANE, prefix: `remote-seq-${c}`, count, clients: 1 });
      ms.bareHttpSeq += await remote({ kind: 'singles', url: bareHttp.url, lane: LANE, prefix: `bare-http-seq-${c}`, count, clients: 1 });
      ms.remoteConc += await remote({ kind: 'singles', url, lane: LANE, prefix: `remote-conc-${c}`, count, clients: CLIENTS });
      ms.bareHttpConc += await remote({ kind: 'singles', url: bareHttp.url, lane: LANE, prefix: `bare-http-conc-${c}`, count, clients: CLIENTS });
    }
    const s0 = performance.now();
    for (let i = 0; i < SINGLES; i++) {
      const res = await t.api.request('POST', '/v1/cards', { id: `fetch-${i}`, lane: LANE, title: 'trivial' });
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    }
    ms.fetchSeq = performance.now() - s0;
    ms.localSeq = await runTask(agent, { kind: 'singles', url, lane: LANE, prefix: 'local-seq', count: SINGLES, clients: 1 });
    ms.localConc = await runTask(agent, { kind: 'singles', url, lane: LANE, prefix: 'local-conc', count: SINGLES, clients: CLIENTS });
    // Every card posted must be queued: a fast 4xx would otherwise pass for a fast enqueue.
    const queued = (await conn.zcard(`${QUEUE_PREFIX}:${LANE}:prioritized`)) + (await conn.llen(`${QUEUE_PREFIX}:${LANE}:wait`));
    const expected = 4 * (ROUNDS + WARMUP_ROUNDS) * BULK + 5 * SINGLES + 2 * WARMUP_SINGLES;
    if (queued !== expected) throw new Error(`${queued} cards queued, expected ${expected}`);
    const bareHttpJobs = await conn.llen(`${QUEUE_PREFIX}:bare-http:wait`);
    const bareHttpExpected = (ROUNDS + WARMUP_ROUNDS) * BULK + 2 * SINGLES + WARMUP_SINGLES;
    if (bareHttpJobs !== bareHttpExpected) throw new Error(`${bareHttpJobs} jobs added by the bare HTTP route, expected ${bareHttpExpected}`);
  } finally {
    agent.destroy();
    await bareHttp.close();
    await bare.close();
    await sameJobs.close();
    await t.stop();
  }

  const perS = (n: number, m: number) => (n / m) * 1000;
  const bareRate = perS(ROUNDS * BULK, ms.bare);
  const sameJobsRate = perS(ROUNDS * BULK, ms.sameJobs);
  const directRate = perS(ROUNDS * BULK, ms.direct);
  // What HTTP adds (client, transport, parsing, validation, reply).
  const httpMsPer100 = (ms.remoteBulk - ms.direct) / ROUNDS;
  const remoteBulk = perS(ROUNDS * BULK, ms.remoteBulk);
  const remotePrioritizedBulk = perS(ROUNDS * BULK, ms.remotePrioritizedBulk);
  const localBulk = perS(ROUNDS * BULK, ms.localBulk);
  const bareHttpBulk = perS(ROUNDS * BULK, ms.bareHttpBulk);
  const singles = {
    remoteSeq: perS(SINGLES, ms.remoteSeq),
    remoteConc: perS(SINGLES, ms.remoteConc),
    fetchSeq: perS(SINGLES, ms.fetchSeq),
    localSeq: perS(SINGLES, ms.localSeq),
    localConc: perS(SINGLES, ms.localConc),
    bareHttpSeq: perS(SINGLES, ms.bareHttpSeq),
    bareHttpConc: perS(SINGLES, ms.bareHttpConc),
  };
  const n0 = (x: number) => Number(x.toFixed(0));
  Object.assign(result, {
    addBulkJobsPerS: n0(bareRate),
    apiBulkCardsPerS: n0(remoteBulk),
    bulkRatio: Number((remoteBulk / bareRate).toFixed(3)),
    bulkRatioMedianOfRounds: Number(median(roundRatios).toFixed(3)),
    addBulkSameJobsPerS: n0(sameJobsRate),
    enqueueManyInProcessCardsPerS: n0(directRate),
    httpMsPer100: Number(httpMsPer100.toFixed(2)),
    apiPrioritizedBulkCardsPerS: n0(remotePrioritizedBulk),
    prioritizedBulkRatio: Number((remotePrioritizedBulk / bareRate).toFixed(3)),
    bulkRatioSameJobs: Number((remoteBulk / sameJobsRate).toFixed(3)),
    bulkRatioSameJobsMedianOfRounds: Number(median(sameJobsRoundRatios).toFixed(3)),
    bareHttpBulkJobsPerS: n0(bareHttpBulk),
    bareHttpBulkRatio: Number((bareHttpBulk / bareRate).toFixed(3)),
    bulkRatioToBareHttp: Number((remoteBulk / bareHttpBulk).toFixed(3)),
    bulkRatioToBareHttpMedianOfRounds: Number(median(bareHttpRoundRatios).toFixed(3)),
    bareHttpSingleKeepAliveJobsPerS: n0(singles.bareHttpSeq),
    bareHttpSingleConcurrentJobsPerS: n0(singles.bareHttpConc),
    inProcessApiBulkCardsPerS: n0(localBulk),
    inProcessBulkRatio: Number((localBulk / bareRate).toFixed(3)),
    singleKeepAliveCardsPerS: n0(singles.remoteSeq),
    singleConcurrentCardsPerS: n0(singles.remoteConc),
    inProcessSingleFetchCardsPerS: n0(singles.fetchSeq),
    inProcessSingleKeepAliveCardsPerS: n0(singles.localSeq),
    inProcessSingleConcurrentCardsPerS: n0(singles.localConc),
  });
  const bulkRow = (label: string, rate: number, base = bareRate) => {
    const ratio = rate / base;
    return `| ${label} | ${rate.toFixed(0)} cards/s | ${base.toFixed(0)} jobs/s | ${ratio.toFixed(2)}× | ≥ 0.7× ${ratio >= 0.7 ? '✔' : '✘'} |`;
  };
  const medianRow = (ratios: number[]) => `| the same, median of the ${ROUNDS} rounds' ratios | | | ${median(ratios).toFixed(2)}× | ≥ 0.7× ${median(ratios) >= 0.7 ? '✔' : '✘'} |`;
  const singleRow = (label: string, rate: number) => `| ${label} | ${rate.toFixed(0)} cards/s | | | ≥ 1,500 cards/s ${rate >= 1500 ? '✔' : '✘'} |`;
  console.log(`\nenqueue benchmark (API only, ${ROUNDS} rounds of ${BULK}, ${SINGLES} single POSTs per row)\n`);
  console.log('| measurement | lanes | bare baseline | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(bulkRow(`\`POST /v1/cards\` {cards:[${BULK}]} vs \`Queue.addBulk\` of ${BULK}, client in its own process`, remoteBulk));
  console.log(medianRow(roundRatios));
  console.log(
    bulkRow(`the same POST vs \`Queue.addBulk\` of the same ${BULK} jobs (lanes' data and job options: attempts, backoff, priority, retention)`, remoteBulk, sameJobsRate),
  );
  console.log(medianRow(sameJobsRoundRatios));
  console.log(
    `| lanes' \`enqueueMany\` of ${BULK} in the API's process (the POST without HTTP) vs the same jobs' \`addBulk\` | ${directRate.toFixed(0)} cards/s | ${sameJobsRate.toFixed(0)} jobs/s | ${(directRate / sameJobsRate).toFixed(2)}× | |`,
  );
  console.log(`| what HTTP adds per POST of ${BULK} (POST − in-process \`enqueueMany\`) | ${httpMsPer100.toFixed(2)} ms | | | |`);
  console.log(bulkRow(`the same POST of ${BULK} prioritized cards (\`priority: 1\`) vs \`Queue.addBulk\` of ${BULK}`, remotePrioritizedBulk));
  console.log(
    `| HTTP alone: a bare Fastify route that only calls \`Queue.addBulk\` (bench/support/bare-http.ts), same client, vs \`addBulk\` of ${BULK} | ${bareHttpBulk.toFixed(0)} jobs/s | ${bareRate.toFixed(0)} jobs/s | ${(bareHttpBulk / bareRate).toFixed(2)}× | |`,
  );
  console.log(
    `| lanes' POST vs that bare route (aggregate; median of rounds ${median(bareHttpRoundRatios).toFixed(2)}×) | ${remoteBulk.toFixed(0)} cards/s | ${bareHttpBulk.toFixed(0)} jobs/s | ${(remoteBulk / bareHttpBulk).toFixed(2)}× | |`,
  );
  console.log(singleRow('single-card `POST /v1/cards`, sequential, client in its own process', singles.remoteSeq));
  console.log(singleRow(`single-card \`POST /v1/cards\`, ${CLIENTS} clients at once in their own process`, singles.remoteConc));
  const bareSingleRow = (label: string, lanesRate: number, rate: number) =>
    `| ${label} | ${lanesRate.toFixed(0)} cards/s | ${rate.toFixed(0)} jobs/s | ${(lanesRate / rate).toFixed(2)}× | |`;
  console.log(bareSingleRow('single POST, sequential: lanes vs the bare route doing `Queue.add`', singles.remoteSeq, singles.bareHttpSeq));
  console.log(bareSingleRow(`single POST, ${CLIENTS} clients: lanes vs the bare route doing \`Queue.add\``, singles.remoteConc, singles.bareHttpConc));
  console.log(bulkRow(`in the API's process (old figure): \`POST\` {cards:[${BULK}]} with \`fetch\``, localBulk));
  console.log(singleRow("in the API's process (old figure): single POST, sequential, `fetch`", singles.fetchSeq));
  console.log(singleRow("in the API's process (old figure): single POST, sequential, `node:http` keep-alive", singles.localSeq));
  console.log(singleRow(`in the API's process (old figure): single POST, ${CLIENTS} keep-alive clients at once`, singles.localConc));
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'enqueue', ...result })}`);
} finally {
  if (child.connected) child.disconnect();
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
