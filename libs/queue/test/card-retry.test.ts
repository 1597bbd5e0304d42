import { randomBytes } from 'node:crypto';
import { UnrecoverableError, Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema, defaults, type Card } from '@lanes/contracts';
import { CardStore, EventLog, LaneQueues, QUEUE_PREFIX, REDRIVE_HANDOVER_MS, createRedis, keys } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/**
 * Retry on real Redis and real BullMQ jobs: a failed or cancelled card is queued again with its
 * history, attempts from 0, its keys kept, and a fresh job under its id that a worker takes.
 */
describe('retry of a finished card', () => {
  let server: TestRedis;
  let redis: Redis;
  let events: EventLog;
  let store: CardStore;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    events = new EventLog(redis);
    store = new CardStore({ redis, now: Date.now, lanes: [] });
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  function setup({ writeJobs }: { writeJobs?: boolean } = {}) {
    const lane = LaneConfigSchema.parse({ name: uid('lane'), agent: ['true'], attempts: 1 });
    const queues = new LaneQueues({ redis, store, lanes: [lane], ...(writeJobs !== undefined ? { writeJobs } : {}) });
    const connection = createRedis(server.url);
    const worker = new Worker(lane.name, null, { connection, prefix: QUEUE_PREFIX, autorun: false });
    closers.push(async () => {
      await worker.close();
      connection.disconnect();
      await queues.queue(lane.name)!.obliterate({ force: true });
      await queues.close();
    });
    const card = (): Card => ({ id: uid('card'), lane: lane.name, title: 'Fix flaky test', priority: 0 });
    /** What a slot does with the card's job: takes it, runs it, and ends it as `end`, card first, then BullMQ. */
    const runTo = async (c: Card, end: 'failed' | 'cancelled' | 'done', finishJob = true) => {
      const token = uid('tok');
      const job = (await worker.getNextJob(token))!;
      expect(job.id).toBe(c.id);
      const run = { kind: 'run', token } as const;
      expect((await store.transition(c, { to: 'running', attempt: job.attemptsMade + 1, sandboxId: 'sb' }, run)).ok).toBe(true);
      const move =
        end === 'failed'
          ? ({ to: 'failed', attempt: 1, failedReason: 'command-failed', exitCode: 1 } as const)
          : end === 'done'
            ? ({ to: 'done', attempt: 1, result: { ok: true } } as const)
            : ({ to: 'cancelled', attempt: 1 } as const);
      expect((await store.transition(c, move, run)).ok).toBe(true);
      const finish = () => (end === 'done' ? job.moveToCompleted({ ok: true }, token, false) : job.moveToFailed(new UnrecoverableError(end), token, false));
      if (finishJob) await finish();
      return { job, finish };
    };
    return { lane, queues, queue: queues.queue(lane.name)!, card, runTo };
  }

  it.each([
    ['its own script', true],
    ["BullMQ's add", false],
  ])('a failed card goes back to the queue with a fresh job (written by %s); a worker takes it and it ends done, both runs in its history', async (_name, writeJobs) => {
    const { queues, queue, card, runTo } = setup({ writeJobs });
    const c = card();
    await queues.enqueue(c);
    await runTo(c, 'failed');
    expect(await (await queue.getJob(c.id))!.getState()).toBe('failed');
    // The terminal move set the card's expiry; a retry takes it away again.
    expect(await redis.pttl(keys.card(c.id))).toBeGreaterThan(0);

    expect(await queues.retry(c.id, 'flaky network')).toEqual({ ok: true, state: 'queued' });
    const job = (await queue.getJob(c.id))!;
    expect(await job.getState()).toBe('waiting');
    expect(job.attemptsMade).toBe(0);
    expect(job.finishedOn).toBeUndefined();
    expect(job.failedReason).toBeUndefined();
    expect(job.data).toEqual(c);
    expect(await redis.zscore(`${QUEUE_PREFIX}:${c.lane}:failed`, c.id)).toBeNull();
    const record = (await store.get(c.id))!;
    expect(record).toMatchObject({ state: 'queued', attempts: 0, infraRetries: 0 });
    expect(record.failedReason).toBeUndefined();
    expect(record.history.at(-1)).toMatchObject({ state: 'queued', attempt: 0, message: 'retried: flaky network' });
    for (const key of [keys.card(c.id), keys.history(c.id), keys.job(c.lane, c.id)]) expect(await redis.pttl(key)).toBe(-1);
    expect((await events.recent(1_000)).filter((e) => e.cardId === c.id).map((e) => e.type)).toEqual(['card.queued', 'card.running', 'card.failed', 'card.retried']);
    expect(await redis.zscore(keys.cardIndex(c.lane, 'queued'), c.id)).not.toBeNull();
    expect(await redis.zscore(keys.cardIndex(c.lane, 'failed'), c.id)).toBeNull();

    await runTo(c, 'done');
    expect(await (await queue.getJob(c.id))!.getState()).toBe('completed');
    const after = (await store.get(c.id))!;
    expect(after.history.map((h) => h.state)).toEqual(['queued', 'running', 'failed', 'queued', 'running', 'done']);
    expect(after.result).toEqual({ ok: true });
  });

  it('a card cancelled while running (its cancel request kept on it) or before it ran (its job removed) is retried; the cancel request does not follow it', async () => {
    const { queues, queue, card, runTo } = setup();
    const running = card();
    await queues.enqueue(running);
    await store.requestCancel(running.id);
    await runTo(running, 'cancelled');
    expect(await queues.retry(running.id)).toEqual({ ok: true, state: 'queued' });
    expect(await store.cancelRequested([running.id])).toEqual([]);
    expect((await store.get(running.id))!.history.at(-1)).toMatchObject({ state: 'queued', message: 'retried' });
    expect(await (await queue.getJob(running.id))!.getState()).toBe('waiting');

    const early = card();
    await queues.enqueue(early);
    expect(await queues.cancel(early.id)).toEqual({ ok: true, state: 'cancelled' });
    expect(await queue.getJob(early.id)).toBeUndefined();
    expect(await queues.retry(early.id)).toEqual({ ok: true, state: 'queued' });
    expect(await (await queue.getJob(early.id))!.getState()).toBe('waiting');
  });

  it('only a failed or cancelled card is retried: done, queued and running are CARD_STATE, an unknown id CARD_NOT_FOUND; nothing is written', async () => {
    const { queues, queue, card, runTo } = setup();
    const done = card();
    await queues.enqueue(done);
    await runTo(done, 'done');
    const queued = card();
    await queues.enqueue(queued);
    for (const [c, state] of [
      [done, 'done'],
      [queued, 'queued'],
    ] as const) {
      const before = await store.get(c.id);
      expect(await queues.retry(c.id, 'x')).toMatchObject({ ok: false, code: 'CARD_STATE', state });
      expect(await store.get(c.id)).toEqual(before);
    }
    expect(await (await queue.getJob(done.id))!.getState()).toBe('completed');
    expect(await queues.retry(uid('missing'))).toMatchObject({ ok: false, code: 'CARD_NOT_FOUND' });
  });

  it('a card whose job a run is still ending waits out the hand-over; one it never ends is CARD_BUSY, with nothing written', async () => {
    const { queues, queue, card, runTo } = setup();
    const c = card();
    await queues.enqueue(c);
    // The card is failed but BullMQ has not heard: the job is still active, under its lock.
    const { finish } = await runTo(c, 'failed', false);
    const before = await store.get(c.id);
    const started = Date.now();
    const busy = await queues.retry(c.id);
    expect(busy).toMatchObject({ ok: false, code: 'CARD_BUSY', state: 'failed' });
    expect(Date.now() - started).toBeGreaterThanOrEqual(REDRIVE_HANDOVER_MS - 50);
    expect(await store.get(c.id)).toEqual(before);
    expect(await (await queue.getJob(c.id))!.getState()).toBe('active');

    // The same, with the run ending the job a moment later: the retry goes through.
    const retrying = queues.retry(c.id, 'after the hand-over');
    await new Promise((r) => setTimeout(r, 200));
    await finish();
    expect(await retrying).toEqual({ ok: true, state: 'queued' });
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');
  });

  it('the retried card’s keys live on; ended again, they take the lane’s retention again', async () => {
    const { queues, card, runTo } = setup();
    const c = card();
    await queues.enqueue(c);
    await runTo(c, 'failed');
    await queues.retry(c.id);
    expect(await redis.pttl(keys.card(c.id))).toBe(-1);
    await runTo(c, 'failed');
    const ttl = await redis.pttl(keys.card(c.id));
    const retentionMs = defaults.DEFAULT_TERMINAL_CARD_RETENTION_DAYS * defaults.MS_PER_DAY;
    expect(ttl).toBeGreaterThan(retentionMs - 60_000);
    expect(ttl).toBeLessThanOrEqual(retentionMs);
  });
});
