/**
 * What a card costs Redis while it waits and after it is done, for the README's sizing rule.
 *
 *   npx tsx --conditions=@lanes/source bench/retention-memory.ts [--cards N] [--log-lines L] [--hash-max-listpack-value B] [--stream-node-max-bytes B]   # defaults 2000, 0, Redis's
 *
 * One private redis-server. N typical cards (a title, a repo, a PR, a 300-character prompt, small
 * metadata, a callbackUrl; the card JSON is about 600 B) are enqueued through `LaneQueues` in bulks of
 * 100, as `POST /v1/cards` does; then a real BullMQ `Worker` takes each and moves it through the card
 * store as a slot does (running, then done with no result), optionally writing L output lines of
 * 80 B to its job log, and BullMQ moves the job to completed. The typical history is the three
 * entries of such a card (queued, running, done).
 *
 * Two figures each, queued and done:
 *   - keys: the sum of `MEMORY USAGE … SAMPLES 0` over every key naming the card (record, history,
 *     BullMQ job hash and log list, the card's output stream), averaged over the cards. A done
 *     card's output stream holds at least its end entry, and Redis allocates a stream's first node
 *     at `stream-node-max-bytes` (4096 by default), whatever the entry's size; a card that printed
 *     nothing keeps that stream only for CARD_OUTPUT_END_GRACE_MS, so "done, retained" is read
 *     once those streams have expired, and "done, just ended" before;
 *   - used_memory: INFO's used_memory delta over the N cards, divided by N, less the growth of the
 *     bounded streams (lanes' events, the lane's own events and callbacks, BullMQ's per-lane events: capped at about 10,000
 *     entries whatever the number of cards). This includes the BullMQ list/set entries that hold the id.
 *
 * Target (issue 24's sizing): a done, retained card without a result costs at most 4 KiB; both
 * figures are printed against it.
 */
import { parseArgs } from 'node:util';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { LaneConfigSchema, agentLimits, defaults, type Card } from '@lanes/contracts';
import { CardStore, LaneQueues, QUEUE_PREFIX, appendJobLog, keys, queueName } from '@lanes/queue';
import { startRedis, waitFor } from '../test/harness/index.js';

const { values } = parseArgs({
  options: {
    cards: { type: 'string', default: '2000' },
    'log-lines': { type: 'string', default: '0' },
    'hash-max-listpack-value': { type: 'string' },
    'stream-node-max-bytes': { type: 'string' },
  },
});
const CARDS = Number(values.cards);
const LOG_LINES = Number(values['log-lines']);
const BULK = 100;
const LANE = 'bench';
const WORKER_CONCURRENCY = 50;
const LOG_LINE = `${'output '.repeat(10)}`.slice(0, 80);
const RUN_TIMEOUT_MS = 600_000;
const TARGET_DONE_BYTES = 4096;

const typicalCard = (i: number): Card => ({
  id: `card-${String(i).padStart(6, '0')}`,
  lane: LANE,
  title: 'Fix the flaky retry test in the payments client',
  repo: 'https://github.com/example-org/payments-service',
  pr: { number: 4000 + i, branch: `fix/flaky-retry-${i}`, base: 'main' },
  prompt: 'Review this pull request. '.repeat(12),
  priority: 0,
  callbackUrl: 'https://board.example.com/hooks/lanes',
  metadata: { board: 'kanban', column: 'review', owner: 'team-payments' },
});

const server = await startRedis();
const redis = new Redis(server.url, { maxRetriesPerRequest: null });
// Every card of the run is queued at once: the lane's bound on open cards must hold them all.
const lane = LaneConfigSchema.parse({ name: LANE, agent: ['true'], maxOpenCards: defaults.MAX_OPEN_CARDS_LIMIT });
const store = new CardStore({ redis, now: Date.now, lanes: [lane] });
const queues = new LaneQueues({ redis, store, lanes: [lane] });
const jq = `${QUEUE_PREFIX}:${queueName(LANE)}`;
const boundedStreams = [keys.events(), keys.laneEvents(LANE), keys.callbacks(), `${jq}:events`];

const usedMemory = async () => Number((await redis.info('memory')).match(/^used_memory:(\d+)/m)![1]);
const memoryUsage = async (key: string) => Number((await redis.call('MEMORY', 'USAGE', key, 'SAMPLES', '0')) ?? 0);
const streamsBytes = async () => (await Promise.all(boundedStreams.map(memoryUsage))).reduce((a, b) => a + b, 0);
/** Mean bytes of the keys naming each card (sampled: every 10th card). */
const keyBytesPerCard = async (cards: Card[]) => {
  const sampled = cards.filter((_, i) => i % 10 === 0);
  let total = 0;
  for (const c of sampled) {
    for (const key of [keys.card(c.id), keys.history(c.id), keys.job(LANE, c.id), keys.jobLogs(LANE, c.id), keys.cardOutput(c.id)]) total += await memoryUsage(key);
  }
  return total / sampled.length;
};
const cards = Array.from({ length: CARDS }, (_, i) => typicalCard(i));

const workerConn = new Redis(server.url, { maxRetriesPerRequest: null });
let worker: Worker | undefined;
try {
  // Redis keeps a hash compact (listpack) only while every value is at most this long (default 64 B).
  if (values['hash-max-listpack-value']) await redis.config('SET', 'hash-max-listpack-value', values['hash-max-listpack-value']);
  const listpackValue = ((await redis.config('GET', 'hash-max-listpack-value')) as string[])[1];
  if (values['stream-node-max-bytes']) await redis.config('SET', 'stream-node-max-bytes', values['stream-node-max-bytes']);
  const streamNodeBytes = ((await redis.config('GET', 'stream-node-max-bytes')) as string[])[1];
  // Create the per-lane BullMQ keys (meta, id counter) before the baseline.
  await queues.enqueueMany([{ ...typicalCard(-1), id: 'warm' }]);
  await redis.del(keys.card('warm'), keys.history('warm'), keys.job(LANE, 'warm'), `${jq}:wait`);
  const base = { used: await usedMemory(), streams: await streamsBytes() };

  for (let i = 0; i < CARDS; i += BULK) {
    const out = await queues.enqueueMany(cards.slice(i, i + BULK));
    if (!out.ok) throw new Error('enqueue refused');
  }
  const queued = { used: await usedMemory(), streams: await streamsBytes(), keys: await keyBytesPerCard(cards) };

  let done = 0;
  worker = new Worker(
    queueName(LANE),
    async (job, token) => {
      const card = job.data as Card;
      const writer = { kind: 'run' as const, token: token! };
      const where = { attempt: job.attemptsMade + 1, slot: 'w-0', sandboxId: 'sb-bench-0000000000' };
      await store.transition(card, { ...where, to: 'running' }, writer);
      if (LOG_LINES > 0)
        await appendJobLog(
          redis,
          LANE,
          card.id,
          Array.from({ length: LOG_LINES }, () => LOG_LINE),
        );
      await store.transition(card, { ...where, to: 'done', exitCode: 0 }, writer);
      done++;
      return null;
    },
    { connection: workerConn, prefix: QUEUE_PREFIX, concurrency: WORKER_CONCURRENCY },
  );
  await waitFor(`${CARDS} jobs completed`, async () => (await redis.zcard(`${jq}:completed`)) >= CARDS, { timeoutMs: RUN_TIMEOUT_MS, intervalMs: 100 });
  await worker.close();
  worker = undefined;
  const ended = { used: await usedMemory(), streams: await streamsBytes(), keys: await keyBytesPerCard(cards) };
  // What stays for the retention: a card that printed nothing keeps its output stream (the end
  // entry alone) only for CARD_OUTPUT_END_GRACE_MS, so the figure is read once those have expired.
  if (LOG_LINES === 0) {
    await waitFor('the output streams of cards that printed nothing expired', async () => (await redis.exists(...cards.map((c) => keys.cardOutput(c.id)))) === 0, {
      timeoutMs: agentLimits.CARD_OUTPUT_END_GRACE_MS + RUN_TIMEOUT_MS,
      intervalMs: 1_000,
    });
  }
  const finished = { used: await usedMemory(), streams: await streamsBytes(), keys: await keyBytesPerCard(cards) };
  const history = await store.get(cards[0]!.id);
  const one = cards[0]!;
  const breakdown = Object.fromEntries(
    await Promise.all(
      Object.entries({
        record: keys.card(one.id),
        history: keys.history(one.id),
        job: keys.job(LANE, one.id),
        jobLogs: keys.jobLogs(LANE, one.id),
        output: keys.cardOutput(one.id),
      }).map(async ([name, key]) => [name, await memoryUsage(key)] as const),
    ),
  );

  const perCard = (s: { used: number; streams: number }) => (s.used - base.used - (s.streams - base.streams)) / CARDS;
  const cardJsonBytes = Buffer.byteLength(JSON.stringify(cards[0]));
  console.log(
    `\nretention-memory: ${CARDS} typical cards (card JSON ${cardJsonBytes} B), history ${history!.history.map((h) => h.state).join(' → ')}, ${LOG_LINES} log lines of 80 B, done ${done}, hash-max-listpack-value ${listpackValue}, stream-node-max-bytes ${streamNodeBytes}\n`,
  );
  console.log('| card | keys naming it (MEMORY USAGE) | used_memory per card, less bounded streams |');
  console.log('|---|---|---|');
  console.log(`| queued | ${queued.keys.toFixed(0)} B | ${perCard(queued).toFixed(0)} B |`);
  console.log(`| done, just ended | ${ended.keys.toFixed(0)} B | ${perCard(ended).toFixed(0)} B |`);
  console.log(`| done, retained | ${finished.keys.toFixed(0)} B | ${perCard(finished).toFixed(0)} B |`);
  const verdict = (bytes: number) => `${bytes.toFixed(0)} B (${(bytes / TARGET_DONE_BYTES).toFixed(2)}×) ${bytes <= TARGET_DONE_BYTES ? 'met' : 'MISSED'}`;
  console.log(`\ntarget: a done, retained card ≤ ${TARGET_DONE_BYTES} B; keys ${verdict(finished.keys)}, used_memory ${verdict(perCard(finished))}`);
  console.log(`one done card's keys (MEMORY USAGE, B): ${JSON.stringify(breakdown)}`);
  console.log(`bounded streams now (MEMORY USAGE, B, whatever the number of cards past ~3,300): ${finished.streams}`);
  const laneEvents = await redis.xlen(keys.laneEvents(LANE));
  console.log(`of which the lane's own event stream (the README's bytes a lane): ${await memoryUsage(keys.laneEvents(LANE))} B for ${laneEvents} events`);
  console.log(
    `BENCH_JSON ${JSON.stringify({ bench: 'retention-memory', cards: CARDS, logLines: LOG_LINES, listpackValue, streamNodeBytes, cardJsonBytes, queuedKeyBytes: Math.round(queued.keys), queuedUsedBytes: Math.round(perCard(queued)), doneKeyBytes: Math.round(finished.keys), doneUsedBytes: Math.round(perCard(finished)) })}`,
  );
} finally {
  await worker?.close();
  await queues.close();
  workerConn.disconnect();
  redis.disconnect();
  await server.stop();
}
