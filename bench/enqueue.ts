/**
 * Enqueue rate through the API beside BullMQ's own `addBulk`, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/enqueue.ts [--rounds R] [--singles M]
 *
 * The stack runs the API only (no worker, no supervisor), so the lane's cards stay queued and
 * nothing but the enqueue path touches Redis. Each round posts `{cards: [100 cards]}` to
 * `POST /v1/cards`, then (interleaved, so load drift hits both alike) `Queue.addBulk` of 100 jobs
 * carrying the same card objects on a bare queue of the same redis-server. Then M single-card POSTs,
 * one after another, as a board posting cards one at a time would, three ways: with `fetch` (the
 * test harness's client), with a `node:http` keep-alive agent, and from C keep-alive clients at once.
 * The client runs in the API's own process, so its CPU is counted against the API: `fetch` (undici)
 * costs about as much CPU per request as the server's whole handling of it (see bench/README.md).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { Agent, request as httpRequest } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { QUEUE_PREFIX } from '@lanes/queue';
import { startRedis, startTestStack } from '../test/harness/index.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '30' }, singles: { type: 'string', default: '500' }, clients: { type: 'string', default: '8' } } });
const ROUNDS = Number(values.rounds);
const SINGLES = Number(values.singles);
const CLIENTS = Number(values.clients);
const BULK = 100;
const WARMUP_ROUNDS = 3;
const LANE = 'bench';

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-enqueue-'));
const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
const result: Record<string, unknown> = { bulk: BULK, rounds: ROUNDS, singles: SINGLES, clients: CLIENTS };

/** One JSON POST over a keep-alive agent: `node:http` without fetch's per-request machinery. */
function postJson(agent: Agent, url: string, path: string, body: unknown): Promise<{ status: number; text: string }> {
  const payload = JSON.stringify(body);
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { agent, hostname, port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          text += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
      },
    );
    req.on('error', reject);
    req.end(payload);
  });
}
try {
  const t = await startTestStack(redis.url, [{ name: LANE, slots: 1, agent: ['true'] }], {
    sandboxDir: join(dir, 'stack'),
    parts: { api: true, worker: false, supervisor: false },
  });
  const bare = new Queue('bare', { connection: conn, prefix: QUEUE_PREFIX });
  const cardsFor = (prefix: string, round: number) => Array.from({ length: BULK }, (_, k) => ({ id: `${prefix}-${round}-${k}`, lane: LANE, title: 'trivial' }));
  let apiMs = 0;
  let bareMs = 0;
  let singleMs = 0;
  let httpMs = 0;
  let concMs = 0;
  try {
    for (let r = -WARMUP_ROUNDS; r < ROUNDS; r++) {
      const cards = cardsFor('api', r);
      const a0 = performance.now();
      const res = await t.api.request('POST', '/v1/cards', { cards });
      const a1 = performance.now();
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const jobs = cardsFor('bare', r).map((card) => ({ name: 'card', data: card, opts: { jobId: card.id } }));
      const b0 = performance.now();
      await bare.addBulk(jobs);
      const b1 = performance.now();
      if (r >= 0) {
        apiMs += a1 - a0;
        bareMs += b1 - b0;
      }
    }
    for (let i = 0; i < SINGLES; i++) {
      const s0 = performance.now();
      const res = await t.api.request('POST', '/v1/cards', { id: `single-${i}`, lane: LANE, title: 'trivial' });
      singleMs += performance.now() - s0;
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    }
    const agent = new Agent({ keepAlive: true });
    try {
      const post = async (id: string) => {
        const res = await postJson(agent, t.stack.url!, '/v1/cards', { id, lane: LANE, title: 'trivial' });
        if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      };
      const h0 = performance.now();
      for (let i = 0; i < SINGLES; i++) await post(`http-${i}`);
      httpMs = performance.now() - h0;
      // C clients, each posting its share one after another, as C boards (or one board's C workers) would.
      let next = 0;
      const c0 = performance.now();
      await Promise.all(
        Array.from({ length: CLIENTS }, async () => {
          for (let i = next++; i < SINGLES; i = next++) await post(`conc-${i}`);
        }),
      );
      concMs = performance.now() - c0;
    } finally {
      agent.destroy();
    }
    // Every card posted must be queued: a fast 4xx would otherwise pass for a fast enqueue.
    const queued = (await conn.zcard(`${QUEUE_PREFIX}:${LANE}:prioritized`)) + (await conn.llen(`${QUEUE_PREFIX}:${LANE}:wait`));
    const expected = (ROUNDS + WARMUP_ROUNDS) * BULK + 3 * SINGLES;
    if (queued !== expected) throw new Error(`${queued} cards queued, expected ${expected}`);
  } finally {
    await bare.close();
    await t.stop();
  }

  const apiRate = ((ROUNDS * BULK) / apiMs) * 1000;
  const bareRate = ((ROUNDS * BULK) / bareMs) * 1000;
  const singleRate = (SINGLES / singleMs) * 1000;
  const httpRate = (SINGLES / httpMs) * 1000;
  const concRate = (SINGLES / concMs) * 1000;
  const ratio = apiRate / bareRate;
  Object.assign(result, {
    apiBulkCardsPerS: Number(apiRate.toFixed(0)),
    addBulkJobsPerS: Number(bareRate.toFixed(0)),
    bulkRatio: Number(ratio.toFixed(3)),
    singlePostCardsPerS: Number(singleRate.toFixed(0)),
    singleVsAddBulk: Number((singleRate / bareRate).toFixed(3)),
    singleKeepAliveCardsPerS: Number(httpRate.toFixed(0)),
    singleConcurrentCardsPerS: Number(concRate.toFixed(0)),
  });
  console.log(`\nenqueue benchmark (API only, ${ROUNDS} rounds of ${BULK}, ${SINGLES} single POSTs)\n`);
  console.log('| measurement | lanes | bare baseline | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(
    `| \`POST /v1/cards\` {cards:[${BULK}]} vs \`Queue.addBulk\` of ${BULK} | ${apiRate.toFixed(0)} cards/s | ${bareRate.toFixed(0)} jobs/s | ${ratio.toFixed(2)}× | ≥ 0.7× ${ratio >= 0.7 ? '✔' : '✘'} |`,
  );
  console.log(
    `| single-card \`POST /v1/cards\`, sequential, \`fetch\` client | ${singleRate.toFixed(0)} cards/s | ${bareRate.toFixed(0)} jobs/s (addBulk) | ${(singleRate / bareRate).toFixed(2)}× | ≥ 1,500 cards/s ${singleRate >= 1500 ? '✔' : '✘'} |`,
  );
  console.log(
    `| single-card \`POST /v1/cards\`, sequential, \`node:http\` keep-alive client | ${httpRate.toFixed(0)} cards/s | | | ≥ 1,500 cards/s ${httpRate >= 1500 ? '✔' : '✘'} |`,
  );
  console.log(`| single-card \`POST /v1/cards\`, ${CLIENTS} keep-alive clients at once | ${concRate.toFixed(0)} cards/s | | | ≥ 1,500 cards/s ${concRate >= 1500 ? '✔' : '✘'} |`);
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'enqueue', ...result })}`);
} finally {
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
