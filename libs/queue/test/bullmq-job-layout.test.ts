import { Job, Queue, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest';
import { LaneConfigSchema, MAX_CARD_PRIORITY, type Card } from '@lanes/contracts';
import { CardStore, LaneQueues, QUEUE_PREFIX, createRedis, jobOptions } from '@lanes/queue';
import { JOB_LAYOUT_BULLMQ_VERSION, JOB_LAYOUT_WRITABLE, installedBullmqVersion, jobLayoutOpts } from '../src/bullmq-job-layout.js';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/**
 * lanes writes each card's BullMQ job itself (bullmq-job-layout.ts). What it writes is checked here
 * against what BullMQ's own `Queue.add` writes, on two redis-servers given the same steps: every
 * key of the lane's queue, with its type and contents. Only the times differ (the job's timestamp,
 * the streams' entry ids).
 *
 * lanes' writer is forced on here (`writeJobs: true`): under another BullMQ the version gate turns it
 * off by default, and the comparison would then set BullMQ's add against itself and pass. Forced
 * on, a bumped BullMQ makes every comparison below fail with the keys that differ (docs/upgrading-bullmq.md).
 */
describe('a job written by lanes is the job BullMQ writes', () => {
  const LANE = 'contract';
  const lane = LaneConfigSchema.parse({ name: LANE, agent: ['true'], attempts: 3 });
  let servers: TestRedis[] = [];
  let lanesSide: { redis: Redis; queues: LaneQueues };
  let bullmqSide: { redis: Redis; queue: Queue };
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    servers = await Promise.all([startRedis(), startRedis()]);
    const lanesRedis = createRedis(servers[0]!.url);
    lanesSide = { redis: lanesRedis, queues: new LaneQueues({ redis: lanesRedis, store: new CardStore({ redis: lanesRedis, now: Date.now }), lanes: [lane], writeJobs: true }) };
    const bullmqRedis = createRedis(servers[1]!.url);
    bullmqSide = { redis: bullmqRedis, queue: new Queue(LANE, { connection: bullmqRedis, prefix: QUEUE_PREFIX }) };
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
    await Promise.all([lanesSide.redis.flushall(), bullmqSide.redis.flushall()]);
  });
  afterAll(async () => {
    await lanesSide?.queues.close();
    await bullmqSide?.queue.close();
    lanesSide?.redis.disconnect();
    bullmqSide?.redis.disconnect();
    await Promise.all(servers.map((s) => s.stop()));
  });

  const card = (id: string, over: Partial<Card> = {}): Card => ({
    id,
    lane: LANE,
    title: 'Fix the flaky test',
    prompt: 'tab\there, "quotes", ✓',
    callbackUrl: 'https://board.example/hook',
    metadata: { board: 'k', n: 1 },
    priority: 0,
    ...over,
  });
  /** The same enqueue on both sides: lanes' own write (no BullMQ add runs for it), and BullMQ's add with the same options. */
  async function enqueueBoth(cards: Card[]): Promise<void> {
    // Every way BullMQ writes a job: Queue.add (Job.create), addBulk (Job.createBulk), a job added on a MULTI (addJob).
    const adds = [vi.spyOn(Job, 'create'), vi.spyOn(Job, 'createBulk'), vi.spyOn(Job.prototype, 'addJob')];
    try {
      expect((await lanesSide.queues.enqueueMany(cards)).ok).toBe(true);
      for (const add of adds) expect(add, "lanes' side: its own writer, not BullMQ's add").not.toHaveBeenCalled();
    } finally {
      for (const add of adds) add.mockRestore();
    }
    for (const c of cards) await bullmqSide.queue.add(LANE, c, jobOptions(c, lane));
  }

  /** Every key of the lane's queue, as comparable contents: times left out, JSON compared parsed. */
  async function queueKeys(redis: Redis): Promise<Record<string, unknown>> {
    const out: Record<string, unknown> = {};
    for (const key of (await redis.keys(`${QUEUE_PREFIX}:${LANE}:*`)).sort()) {
      const type = await redis.type(key);
      if (type === 'hash') {
        const { timestamp, opts, data, ...rest } = await redis.hgetall(key);
        out[key] = {
          type,
          ...rest,
          ...(timestamp !== undefined ? { timestamp: Number(timestamp) > Date.now() - 60_000 && Number(timestamp) <= Date.now() ? 'recent' : timestamp } : {}),
          ...(opts !== undefined ? { opts: JSON.parse(opts) } : {}),
          ...(data !== undefined ? { data: JSON.parse(data) } : {}),
        };
      } else if (type === 'list') out[key] = { type, items: await redis.lrange(key, 0, -1) };
      else if (type === 'zset') out[key] = { type, items: await redis.zrange(key, 0, -1, 'WITHSCORES') };
      else if (type === 'stream') out[key] = { type, entries: (await redis.xrange(key, '-', '+')).map(([, fields]) => fields) };
      else if (type === 'string') out[key] = { type, value: await redis.get(key) };
      else out[key] = { type };
    }
    return out;
  }
  async function expectSameKeys(): Promise<Record<string, unknown>> {
    const [ours, theirs] = await Promise.all([queueKeys(lanesSide.redis), queueKeys(bullmqSide.redis)]);
    expect(ours).toEqual(theirs);
    return ours;
  }

  it('runs under the BullMQ whose layout it was checked against, where lanes writes jobs by default', () => {
    // A new BullMQ: the comparisons below print what its add writes differently; bring
    // bullmq-job-layout.ts in line with it, then move the version there (docs/upgrading-bullmq.md).
    expect(installedBullmqVersion).toBe(JOB_LAYOUT_BULLMQ_VERSION);
    expect(JOB_LAYOUT_WRITABLE).toBe(true);
  });

  it('a batch of new cards: the same job hashes, wait list, marker, id counter, meta and events', async () => {
    await enqueueBoth([card('a'), card('b', { title: 'second' })]);
    const keys = await expectSameKeys();
    // The comparison saw the job itself, not two empty queues.
    expect(keys[`${QUEUE_PREFIX}:${LANE}:a`]).toMatchObject({ name: LANE, data: card('a'), timestamp: 'recent', delay: '0', priority: '0' });
    expect(keys[`${QUEUE_PREFIX}:${LANE}:wait`]).toEqual({ type: 'list', items: ['b', 'a'] });
  });

  it('prioritized cards: the same prioritized set (scores from the priority counter, in order within a priority), hashes and events', async () => {
    await enqueueBoth([card('a', { priority: 3 }), card('b'), card('c', { priority: 1 }), card('d', { priority: 3 }), card('e', { priority: MAX_CARD_PRIORITY })]);
    const keys = await expectSameKeys();
    expect(keys[`${QUEUE_PREFIX}:${LANE}:prioritized`]).toMatchObject({
      items: ['c', expect.any(String), 'a', expect.any(String), 'd', expect.any(String), 'e', expect.any(String)],
    });
    expect(keys[`${QUEUE_PREFIX}:${LANE}:a`]).toMatchObject({ priority: '3' });
    expect(keys[`${QUEUE_PREFIX}:${LANE}:wait`]).toEqual({ type: 'list', items: ['b'] });
  });

  it("prioritized cards past the priority counter's 32 bits: the score wraps as BullMQ's does", async () => {
    for (const redis of [lanesSide.redis, bullmqSide.redis]) await redis.set(`${QUEUE_PREFIX}:${LANE}:pc`, 0xffff_fffe);
    await enqueueBoth([card('a', { priority: 3 }), card('b', { priority: 3 }), card('c', { priority: 3 })]);
    const keys = await expectSameKeys();
    // BullMQ's score keeps only the counter's low 32 bits, so 'b' and 'c' come before 'a'.
    expect(keys[`${QUEUE_PREFIX}:${LANE}:prioritized`]).toMatchObject({ items: ['b', expect.any(String), 'c', expect.any(String), 'a', expect.any(String)] });
  });

  it('a repeat of a queued card: BullMQ answers a duplicate, and so does lanes', async () => {
    await enqueueBoth([card('a')]);
    await enqueueBoth([card('a')]);
    const keys = await expectSameKeys();
    expect(JSON.stringify(keys[`${QUEUE_PREFIX}:${LANE}:events`])).toContain('duplicated');
  });

  it('a paused queue, and one at its concurrency limit: the job waits, no marker wakes a worker', async () => {
    for (const side of [lanesSide.queues.queue(LANE)!, bullmqSide.queue]) await side.pause();
    await enqueueBoth([card('a')]);
    expect(await expectSameKeys()).not.toHaveProperty(`${QUEUE_PREFIX}:${LANE}:marker`);
    for (const side of [lanesSide.queues.queue(LANE)!, bullmqSide.queue]) {
      await side.resume();
      await side.setGlobalConcurrency(0);
    }
    // resume() left a marker for the waiting job: without it, a marker after the next add would be lanes' own.
    for (const redis of [lanesSide.redis, bullmqSide.redis]) await redis.del(`${QUEUE_PREFIX}:${LANE}:marker`);
    await enqueueBoth([card('b')]);
    expect(await expectSameKeys()).not.toHaveProperty(`${QUEUE_PREFIX}:${LANE}:marker`);
  });

  it("a BullMQ worker takes lanes' job and reads it as BullMQ's own", async () => {
    await enqueueBoth([card('a')]);
    const taken = await Promise.all(
      [lanesSide.redis, bullmqSide.redis].map(async (redis) => {
        const connection = redis.duplicate();
        closers.push(async () => connection.disconnect());
        const seen: unknown[] = [];
        const worker = new Worker(LANE, async (job) => seen.push({ ...job.asJSON(), timestamp: 'recent', processedOn: 'set' }), { connection, prefix: QUEUE_PREFIX });
        closers.push(() => worker.close());
        await waitFor('the job taken', () => seen.length === 1);
        return seen[0];
      }),
    );
    expect(taken[0]).toEqual(taken[1]);
    expect(taken[0]).toMatchObject({ id: 'a', name: LANE, data: JSON.stringify(card('a')), opts: jobOptions(card('a'), lane) });
  });
});

describe('jobLayoutOpts', () => {
  it.each([
    ['default lane', {}],
    ['attempts and retention of its own', { attempts: 7, retention: { terminalCardDays: 2 } }],
  ])('is the JSON of jobOptions for every card of a lane (%s), whatever its id and priority', (_name, over) => {
    const lane = LaneConfigSchema.parse({ name: 'opts', agent: ['true'], ...over });
    for (const priority of [0, 1, MAX_CARD_PRIORITY, 1])
      for (const id of ['a', 'card-1.2_x', 'Z'.repeat(128)]) {
        const card: Card = { id, lane: 'opts', title: 't', priority };
        expect(jobLayoutOpts(card, lane)).toBe(JSON.stringify(jobOptions(card, lane)));
      }
  });
});
