import { randomBytes } from 'node:crypto';
import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema, MAX_CARD_PRIORITY, type Card } from '@lanes/contracts';
import { CardStore, EventLog, LaneQueues, QUEUE_PREFIX, createRedis, jobOptions, keys, type CardMove, type CardWriter } from '@lanes/queue';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

describe('LaneQueues on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let events: EventLog;
  let store: CardStore;
  const closers: Array<() => Promise<unknown>> = [];

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    events = new EventLog(redis);
    store = new CardStore({ redis, now: Date.now });
  });
  afterEach(async () => {
    for (const close of closers.splice(0).reverse()) await close();
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  /**
   * A BullMQ worker that fetches by hand, on a connection of its own. BullMQ leaves a connection it
   * was given open, so both are closed after the test: a connection left behind would reconnect to
   * the stopped server for the rest of the run.
   */
  function handWorker(laneName: string): Worker {
    const connection = createRedis(server.url);
    closers.push(async () => connection.disconnect());
    const worker = new Worker(laneName, null, { connection, prefix: QUEUE_PREFIX, autorun: false });
    closers.push(() => worker.close());
    return worker;
  }

  /** A LaneQueues over one fresh, uniquely named lane; closed after the test. */
  function laneQueues({
    writeJobs,
    callbackBacklogMax,
    laneCallbackBacklogMax,
    maxOpenCards,
    maxOpenBytes,
  }: {
    writeJobs?: boolean;
    callbackBacklogMax?: number;
    laneCallbackBacklogMax?: number;
    maxOpenCards?: number;
    maxOpenBytes?: number;
  } = {}) {
    const lane = LaneConfigSchema.parse({
      name: uid('lane'),
      agent: ['true'],
      attempts: 3,
      ...(maxOpenCards !== undefined ? { maxOpenCards } : {}),
      ...(maxOpenBytes !== undefined ? { maxOpenBytes } : {}),
    });
    const queues = new LaneQueues({
      redis,
      store,
      lanes: [lane],
      ...(writeJobs !== undefined ? { writeJobs } : {}),
      ...(callbackBacklogMax !== undefined ? { callbackBacklogMax } : {}),
      ...(laneCallbackBacklogMax !== undefined ? { laneCallbackBacklogMax } : {}),
    });
    closers.push(async () => {
      await queues.queue(lane.name)!.obliterate({ force: true });
      await queues.close();
    });
    const card = (over: Partial<Card> = {}): Card => ({ id: uid('card'), lane: lane.name, title: 'Fix flaky test', priority: 0, ...over });
    const queue = queues.queue(lane.name)!;
    /** A new card blocked as a run that met `why` leaves it: its record blocked, its job delayed for an hour. */
    const blockedCard = async (why: BlockedBy = SANDBOX_DEAD): Promise<Card> => {
      const c = card();
      await store.create(c);
      await queue.add(lane.name, c, { ...jobOptions(c, lane), delay: BLOCKED_FOR_MS });
      await store.transition(c, { to: 'blocked', ...why, retryAt: Date.now() + BLOCKED_FOR_MS }, board);
      return c;
    };
    return { lane, queues, queue, card, blockedCard };
  }

  const jobKey = (lane: string, id: string) => `${QUEUE_PREFIX}:${lane}:${id}`;
  /** Gives the card's job a lock held by `token`, as a worker taking it would, and writes as that run. */
  const runAs = async (c: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(c.lane, c.id), token);
    return { kind: 'run', token };
  };
  const board: CardWriter = { kind: 'board' };
  type BlockedBy = Omit<Extract<CardMove, { to: 'blocked' }>, 'to' | 'retryAt'>;
  const SANDBOX_DEAD: BlockedBy = { attempt: 1, blockedReason: 'sandbox-dead', observedExitCode: 137, sandboxId: 'sb-dead' };
  const NEEDS_HUMAN: BlockedBy = { attempt: 2, blockedReason: 'needs-human', message: 'which branch?' };
  const BLOCKED_FOR_MS = 3_600_000;
  const eventTypes = async (cardId: string) => (await events.recent(1_000)).filter((e) => e.cardId === cardId).map((e) => e.type);

  it('enqueue creates the BullMQ job with jobId = card id under prefix lanes, with the lane job options', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card({ priority: 3, metadata: { board: 'k' } });
    expect(await queues.enqueue(c)).toEqual({ created: true, id: c.id, state: 'queued' });
    expect(await redis.exists(jobKey(lane.name, c.id))).toBe(1);
    const job = (await queue.getJob(c.id))!;
    expect(job.id).toBe(c.id);
    expect(job.name).toBe(lane.name);
    expect(job.data).toEqual(c);
    expect(job.opts.attempts).toBe(3);
    expect(job.opts.priority).toBe(3);
    expect(await job.getState()).toBe('prioritized');
    expect((await store.get(c.id))!.state).toBe('queued');
  });

  it('enqueue is idempotent: the second call returns created:false and leaves one job', async () => {
    const { queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    expect(await queues.enqueue({ ...c, title: 'again' })).toEqual({ created: false, id: c.id, state: 'queued' });
    expect(await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active')).toEqual({ waiting: 1, prioritized: 0, delayed: 0, active: 0 });
    expect((await queue.getJob(c.id))!.data.title).toBe('Fix flaky test');
    expect((await store.get(c.id))!.history).toHaveLength(1);
  });

  it('enqueue of an id whose card already finished returns its state and adds no job', async () => {
    const { queues, queue, card } = laneQueues();
    const c = card();
    await store.create(c);
    const run = await runAs(c, 't1');
    await store.transition(c, { to: 'running', attempt: 1, sandboxId: 'sb' }, run);
    await store.transition(c, { to: 'done', attempt: 1 }, run);
    expect(await queues.enqueue(c)).toEqual({ created: false, id: c.id, state: 'done' });
    expect(await queue.getJob(c.id)).toBeUndefined();
  });

  it('enqueue repairs a record left queued with no job (a crash between the two writes)', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card();
    await store.create(c);
    expect(await queue.getJob(c.id)).toBeUndefined();
    expect(await queues.enqueue(c)).toEqual({ created: false, id: c.id, state: 'queued' });
    expect(await redis.exists(jobKey(lane.name, c.id))).toBe(1);
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');
  });

  it('enqueueMany: new cards, a repeat, a finished card and a record without its job, in one batch', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const [fresh, repeat, finished, orphan] = [card({ priority: 2 }), card(), card(), card()];
    await queues.enqueue(repeat);
    await store.create(finished);
    const run = await runAs(finished, 'em');
    await store.transition(finished, { to: 'running', attempt: 1, sandboxId: 'sb' }, run);
    await store.transition(finished, { to: 'done', attempt: 1 }, run);
    await store.create(orphan);
    const out = await queues.enqueueMany([fresh, repeat, finished, orphan]);
    expect(out).toEqual({
      ok: true,
      results: [
        { created: true, id: fresh.id, state: 'queued' },
        { created: false, id: repeat.id, state: 'queued' },
        { created: false, id: finished.id, state: 'done' },
        { created: false, id: orphan.id, state: 'queued' },
      ],
    });
    expect((await queue.getJob(fresh.id))!.opts).toMatchObject({ priority: 2, attempts: 3 });
    expect((await queue.getJob(fresh.id))!.name).toBe(lane.name);
    expect(await queue.getJob(orphan.id)).toBeDefined();
    expect(await queue.getJob(finished.id)).toBeUndefined();
    expect(await queue.getJobCounts('waiting', 'prioritized')).toEqual({ waiting: 2, prioritized: 1 });
  });

  it('a batch carries any card text whole: tabs, newlines, quotes and non-ASCII in a card do not split the batch', async () => {
    const { queues, card } = laneQueues();
    const awkward = card({ title: 'tab\there\nnew line "quoted" \\ back', prompt: 'line 1\r\nline 2\u0000\u001e end ✓ 日本', metadata: { 'k\tey': 'v\nal' } });
    const plain = card();
    expect(await queues.enqueueMany([awkward, plain])).toMatchObject({ ok: true, results: [{ created: true }, { created: true }] });
    expect(JSON.parse((await redis.hget(keys.card(awkward.id), 'card'))!)).toEqual(awkward);
    expect(JSON.parse((await redis.hget(keys.card(plain.id), 'card'))!)).toEqual(plain);
    expect((await store.get(awkward.id))!.state).toBe('queued');
  });

  it('enqueueMany refuses a batch whole when an id is on another lane, for one card or several', async () => {
    const { queues, queue, card } = laneQueues();
    const other = laneQueues();
    const taken = other.card();
    await other.queues.enqueue(taken);
    const fresh = card();
    const conflict = { ok: false, conflicts: [{ index: 1, id: taken.id, lane: other.lane.name }] };
    expect(await queues.enqueueMany([fresh, { ...taken, lane: fresh.lane }])).toEqual(conflict);
    expect(await store.get(fresh.id)).toBeUndefined();
    expect(await queue.getJob(fresh.id)).toBeUndefined();
    expect(await queues.enqueueMany([{ ...taken, lane: fresh.lane }])).toEqual({ ...conflict, conflicts: [{ ...conflict.conflicts[0], index: 0 }] });
    expect(await queue.getJob(taken.id)).toBeUndefined();
  });

  /** No guard of an enqueue outlives its MULTI: neither the guard set nor a guard hash at a job key. */
  const expectNoGuards = async (lane: string, ids: string[]) => {
    expect(await redis.exists(keys.enqueueGuards())).toBe(0);
    for (const id of ids) expect(await redis.hget(jobKey(lane, id), 'lanesEnqueueGuard')).toBeNull();
  };

  /** Jobs written by lanes' enqueue script (bullmq-job-layout.ts), or by BullMQ's add (another BullMQ). */
  const JOB_WRITERS = [
    { writeJobs: true, writer: "lanes' script" },
    { writeJobs: false, writer: "BullMQ's add" },
  ] as const;
  /** Each way an enqueue is written, with the batch size that takes it (one card alone goes by BullMQ's add outside a MULTI). */
  const ENQUEUE_PATHS = [
    ['written by the script', true, 2],
    ['added by BullMQ, in one MULTI', false, 2],
    ['added by BullMQ, one card', false, 1],
  ] as const;

  it.each(JOB_WRITERS)('enqueue repairs a record left queued with no job, plain or prioritized (job by $writer)', async ({ writeJobs }) => {
    const { lane, queues, queue, card } = laneQueues({ writeJobs });
    const [plain, urgent] = [card(), card({ priority: 4 })];
    for (const c of [plain, urgent]) await store.create(c);
    expect(await queues.enqueueMany([plain, urgent])).toEqual({
      ok: true,
      results: [plain, urgent].map((c) => ({ created: false, id: c.id, state: 'queued' })),
    });
    expect(await redis.exists(jobKey(lane.name, plain.id), jobKey(lane.name, urgent.id))).toBe(2);
    expect(await (await queue.getJob(plain.id))!.getState()).toBe('waiting');
    expect(await (await queue.getJob(urgent.id))!.getState()).toBe('prioritized');
  });

  it.each(JOB_WRITERS)('the most urgent and the least urgent priority a card may have both get their job (job by $writer)', async ({ writeJobs }) => {
    const { queues, queue, card } = laneQueues({ writeJobs });
    const [first, last] = [card({ priority: 1 }), card({ priority: MAX_CARD_PRIORITY })];
    expect((await queues.enqueueMany([last, first])).ok).toBe(true);
    expect(await queue.getPrioritized()).toEqual([expect.objectContaining({ id: first.id }), expect.objectContaining({ id: last.id })]);
  });

  it.each(JOB_WRITERS)('enqueue gives no job to a card in any state but queued whose job is gone, and leaves no guard (job by $writer)', async ({ writeJobs }) => {
    const { lane, queues, queue, card } = laneQueues({ writeJobs });
    const [running, blocked, failed, cancelled] = [card(), card({ priority: 1 }), card(), card({ priority: 2 })];
    for (const c of [running, blocked, failed, cancelled]) await store.create(c);
    await store.transition(running, { to: 'running', attempt: 1, sandboxId: 'sb' }, await runAs(running, 'r'));
    await store.transition(blocked, { to: 'blocked', attempt: 1, blockedReason: 'needs-human', message: 'help', retryAt: Date.now() + 60_000 }, board);
    const runF = await runAs(failed, 'f');
    await store.transition(failed, { to: 'running', attempt: 1, sandboxId: 'sb' }, runF);
    await store.transition(failed, { to: 'failed', attempt: 1, failedReason: 'command-failed' }, runF);
    await store.transition(cancelled, { to: 'cancelled', attempt: 0, message: 'cancelled before it ran' }, board);
    const all = [running, blocked, failed, cancelled];
    expect(await queues.enqueueMany(all)).toEqual({
      ok: true,
      results: all.map((c, i) => ({ created: false, id: c.id, state: ['running', 'blocked', 'failed', 'cancelled'][i] })),
    });
    for (const c of all) expect(await redis.exists(jobKey(lane.name, c.id))).toBe(0);
    expect(await queue.getJobCounts('waiting', 'prioritized', 'delayed', 'active')).toEqual({ waiting: 0, prioritized: 0, delayed: 0, active: 0 });
    await expectNoGuards(
      lane.name,
      all.map((c) => c.id),
    );
    // One at a time too (a single POST).
    for (const c of all) expect(await queues.enqueue(c)).toMatchObject({ created: false });
    for (const c of all) expect(await redis.exists(jobKey(lane.name, c.id))).toBe(0);
    await expectNoGuards(
      lane.name,
      all.map((c) => c.id),
    );
  });

  it.each(JOB_WRITERS)('a refused batch writes no record, no job, no event and no guard, and leaves its repeats as they were (job by $writer)', async ({ writeJobs }) => {
    const { queues, queue, card } = laneQueues({ writeJobs });
    const other = laneQueues({ writeJobs });
    const taken = other.card();
    await other.queues.enqueue(taken);
    const repeat = card();
    await queues.enqueue(repeat);
    const fresh = card({ priority: 1 });
    const eventsBefore = (await events.recent(1_000)).length;
    const out = await queues.enqueueMany([fresh, repeat, { ...taken, lane: fresh.lane }]);
    expect(out).toEqual({ ok: false, conflicts: [{ index: 2, id: taken.id, lane: other.lane.name }] });
    expect(await store.get(fresh.id)).toBeUndefined();
    expect(await queue.getJob(fresh.id)).toBeUndefined();
    expect(await queue.getJob(taken.id)).toBeUndefined();
    expect(await (await queue.getJob(repeat.id))!.getState()).toBe('waiting');
    expect(await (await other.queue.getJob(taken.id))!.getState()).toBe('waiting');
    expect((await store.get(repeat.id))!.history).toHaveLength(1);
    expect((await events.recent(1_000)).length).toBe(eventsBefore);
    await expectNoGuards(fresh.lane, [fresh.id, repeat.id, taken.id]);
  });

  it.each(JOB_WRITERS)('the same id twice in one batch on one lane: the first one is the card and its job (job by $writer)', async ({ writeJobs }) => {
    const { queues, queue, card } = laneQueues({ writeJobs });
    const [plainFirst, prioritizedFirst] = [card(), card({ priority: 2 })];
    const out = await queues.enqueueMany([plainFirst, prioritizedFirst, { ...plainFirst, title: 'second', priority: 3 }, { ...prioritizedFirst, title: 'second', priority: 0 }]);
    expect(out.ok && out.results.map((r) => r.created)).toEqual([true, true, false, false]);
    for (const first of [plainFirst, prioritizedFirst]) {
      expect(await store.get(first.id)).toMatchObject({ ...first, history: [expect.objectContaining({ state: 'queued' })] });
      expect((await queue.getJob(first.id))!.data).toEqual(first);
    }
    expect(await queue.getJobCounts('waiting', 'prioritized')).toEqual({ waiting: 1, prioritized: 1 });
  });

  it('the same id twice in one batch on two lanes refuses the batch whole', async () => {
    const { queues, card } = laneQueues();
    const c = card();
    const lanes2 = LaneConfigSchema.parse({ name: uid('lane'), agent: ['true'] });
    const both = new LaneQueues({ redis, store, lanes: [queues.lane(c.lane)!, lanes2] });
    closers.push(async () => {
      await both.queue(lanes2.name)!.obliterate({ force: true });
      await both.close();
    });
    expect(await both.enqueueMany([c, { ...c, lane: lanes2.name }])).toEqual({ ok: false, conflicts: [{ index: 1, id: c.id, lane: c.lane }] });
    expect(await store.get(c.id)).toBeUndefined();
    expect(await redis.exists(jobKey(c.lane, c.id), jobKey(lanes2.name, c.id))).toBe(0);
  });

  /** The commands an enqueue sends, as MONITOR sees them (commands run inside scripts left out). */
  async function commandsOf(enqueue: () => Promise<unknown>): Promise<string[]> {
    const monitor = await redis.monitor();
    const seen: string[] = [];
    monitor.on('monitor', (_time: string, args: string[], source: string) => {
      if (!source.startsWith('lua')) seen.push(String(args[0]).toLowerCase());
    });
    await enqueue();
    // A command of this connection marks where the enqueue's commands end.
    await redis.ping();
    await waitFor('the ping seen by MONITOR', () => seen.includes('ping'));
    monitor.disconnect();
    return seen.slice(0, seen.indexOf('ping'));
  }

  it.each(ENQUEUE_PATHS)('at the callback backlog bound a batch with a callbackUrl is refused whole, jobs %s', async (_how, writeJobs, size) => {
    await redis.del(keys.callbacks());
    const { queues, queue, card } = laneQueues({ writeJobs, callbackBacklogMax: 3 });
    for (let i = 0; i < 2; i++) await redis.xadd(keys.callbacks(), '*', 'e', '{}');
    // One under the bound: taken.
    const under = card({ callbackUrl: 'https://board.example/hook' });
    expect(await queues.enqueueMany([under])).toMatchObject({ ok: true });
    await redis.xadd(keys.callbacks(), '*', 'e', '{}');
    expect(await queues.callbackBacklog()).toEqual({ length: 3, max: 3 });
    // At the bound: a batch holding one card with a callbackUrl is refused, and nothing of it written.
    const batch = [card(), card({ callbackUrl: 'https://board.example/hook' })].slice(2 - size);
    expect(await queues.enqueueMany(batch)).toEqual({ ok: false, callbackBacklog: { length: 3, max: 3 } });
    for (const c of batch) {
      expect(await store.get(c.id)).toBeUndefined();
      expect(await queue.getJob(c.id)).toBeUndefined();
    }
    expect(await redis.exists(keys.enqueueGuards())).toBe(0);
    // Cards without a callbackUrl owe no callback: still taken.
    const quiet = card();
    expect(await queues.enqueueMany([quiet])).toMatchObject({ ok: true, results: [{ created: true }] });
    expect(await queue.getJob(quiet.id)).toBeDefined();
    await redis.del(keys.callbacks());
  });

  it.each(ENQUEUE_PATHS)(
    'a batch that would take a lane past its maxOpenCards is refused whole; ended cards free places, repeats are still answered (jobs %s)',
    async (_how, writeJobs, size) => {
      const { queues, queue, card, blockedCard } = laneQueues({ writeJobs, maxOpenCards: 4 });
      const running = card();
      const ending = card();
      expect(await queues.enqueueMany([running, ending])).toMatchObject({ ok: true });
      await store.transition(running, { to: 'running', attempt: 1, sandboxId: 'sb' }, await runAs(running, 'r'));
      await blockedCard();
      // Queued, running and blocked all count: 3 open, room for one.
      expect(await queues.openCards([queue.name])).toEqual([3]);
      const fourth = card();
      expect(await queues.enqueueMany([fourth])).toMatchObject({ ok: true, results: [{ created: true }] });
      // Full: a batch with a new card is refused whole, nothing of it written (its repeat neither).
      const batch = [fourth, card()].slice(2 - size);
      const refused = await queues.enqueueMany(batch);
      expect(refused).toEqual({ ok: false, laneFull: { lane: queue.name, unit: 'cards', open: 4, adding: 1, max: 4 } });
      const fresh = batch.at(-1)!;
      expect(await store.get(fresh.id)).toBeUndefined();
      expect(await queue.getJob(fresh.id)).toBeUndefined();
      expect(await redis.exists(keys.enqueueGuards())).toBe(0);
      expect(await queue.getJobCountByTypes('wait', 'prioritized', 'delayed', 'active')).toBe(4);
      // A repeat adds nothing, so it is answered as ever.
      expect(await queues.enqueueMany([fourth])).toMatchObject({ ok: true, results: [{ created: false, state: 'queued' }] });
      // A card that ends gives its place back.
      await store.transition(ending, { to: 'cancelled', attempt: 0 }, board);
      expect(await queues.enqueueMany([fresh])).toMatchObject({ ok: true, results: [{ created: true }] });
      expect(await queue.getJob(fresh.id)).toBeDefined();
      expect(await queues.openCards([queue.name])).toEqual([4]);
      // A retry would add an open card too: refused while the lane is full.
      expect(await queues.retry(ending.id)).toMatchObject({ ok: false, code: 'LANE_FULL', state: 'cancelled' });
      expect((await store.get(ending.id))?.state).toBe('cancelled');
    },
  );

  it.each(ENQUEUE_PATHS)(
    "a batch that would take a lane's open cards past its maxOpenBytes of card JSON is refused whole; an end gives its bytes back, a retry takes them again (jobs %s)",
    async (_how, writeJobs, size) => {
      const bytes = (c: Card) => Buffer.byteLength(JSON.stringify(c));
      const probe = laneQueues({ writeJobs });
      const [first, second] = [probe.card({ prompt: 'a'.repeat(500) }), probe.card({ prompt: 'b'.repeat(500) })];
      const max = bytes(first) + bytes(second) + 10;
      const { queues, queue, card } = laneQueues({ writeJobs, maxOpenBytes: max });
      const [a, b] = [card({ prompt: first.prompt! }), card({ prompt: second.prompt! })];
      // Drift from an earlier life of the lane: with no open card, the lane holds no bytes.
      await redis.set(keys.openBytes(queue.name), 1e9);
      expect(await queues.enqueueMany([a, b])).toMatchObject({ ok: true });
      expect(Number(await redis.get(keys.openBytes(queue.name)))).toBe(bytes(a) + bytes(b));
      const batch = [card(), card({ prompt: 'c'.repeat(300) })].slice(2 - size);
      const adding = batch.reduce((sum, c) => sum + bytes(c), 0);
      expect(await queues.enqueueMany(batch)).toEqual({ ok: false, laneFull: { lane: queue.name, unit: 'bytes', open: bytes(a) + bytes(b), adding, max } });
      for (const c of batch) expect(await store.get(c.id)).toBeUndefined();
      expect(await redis.exists(keys.enqueueGuards())).toBe(0);
      // The end of a card gives its bytes back; a retry takes them again, refused while they would not fit.
      await queues.cancel(a.id);
      expect(Number(await redis.get(keys.openBytes(queue.name)))).toBe(bytes(b));
      expect(await queues.enqueueMany(batch)).toMatchObject({ ok: true });
      expect(await queues.retry(a.id)).toMatchObject({ ok: false, code: 'LANE_FULL', message: expect.stringContaining('maxOpenBytes') });
      for (const c of batch) await queues.cancel(c.id);
      expect(await queues.retry(a.id)).toEqual({ ok: true, state: 'queued' });
      expect(Number(await redis.get(keys.openBytes(queue.name)))).toBe(bytes(a) + bytes(b));
      await queues.cancel(a.id);
      await queues.cancel(b.id);
      expect(await redis.exists(keys.openBytes(queue.name))).toBe(0);
    },
  );

  it.each(ENQUEUE_PATHS)(
    "a lane that owes its bound of callbacks is refused cards with a callbackUrl, naming it; another lane's, and its own without one, are taken (jobs %s)",
    async (_how, writeJobs, size) => {
      await redis.del(keys.callbacks(), keys.callbacksOwed());
      const hook = { callbackUrl: 'https://board.example/hook' };
      const { queues, queue, card } = laneQueues({ writeJobs, laneCallbackBacklogMax: 3 });
      const other = laneQueues({ writeJobs, laneCallbackBacklogMax: 3 });
      // Three cards with a callback end: the card script owes each end to the lane's board.
      for (let i = 0; i < 3; i++) {
        const c = card(hook);
        expect(await queues.enqueueMany([c])).toMatchObject({ ok: true });
        await store.transition(c, { to: 'cancelled', attempt: 0 }, board);
      }
      expect(await queues.callbacksOwed()).toEqual({ [queue.name]: 3 });
      const [, fields] = ((await redis.xrange(keys.callbacks(), '-', '+')) as Array<[string, string[]]>)[0]!;
      expect(fields.slice(2)).toEqual(['l', queue.name]);
      const batch = [card(), card(hook)].slice(2 - size);
      expect(await queues.enqueueMany(batch)).toEqual({ ok: false, callbackBacklog: { length: 3, max: 3, lane: queue.name } });
      for (const c of batch) expect(await store.get(c.id)).toBeUndefined();
      expect(await redis.exists(keys.enqueueGuards())).toBe(0);
      expect(await queues.enqueueMany([card()])).toMatchObject({ ok: true, results: [{ created: true }] });
      expect(await other.queues.enqueueMany([other.card(hook)])).toMatchObject({ ok: true, results: [{ created: true }] });
      // A count that drifted high refuses nothing while the stream itself is shorter than the bound.
      await redis.del(keys.callbacks());
      expect(await queues.enqueueMany([card(hook)])).toMatchObject({ ok: true, results: [{ created: true }] });
      await redis.del(keys.callbacks(), keys.callbacksOwed());
    },
  );

  it.each(JOB_WRITERS)(
    "a card with a supersede key cancels its key's earlier card not yet started, in a batch or one by one; a running one only with cancel-running (job by $writer)",
    async ({ writeJobs }) => {
      const { queues, queue, card } = laneQueues({ writeJobs });
      const [a, b, c] = [card({ supersedeKey: 'acme/web#1' }), card({ supersedeKey: 'acme/web#1' }), card({ supersedeKey: 'acme/web#1' })];
      await queues.enqueue(a);
      // Another key and a card without one are left alone.
      const [other, plain] = [card({ supersedeKey: 'acme/web#2' }), card()];
      expect((await queues.enqueueMany([b, other, plain, c])).ok).toBe(true);
      for (const [old, by] of [
        [a, b],
        [b, c],
      ] as const) {
        const record = (await store.get(old.id))!;
        expect(record.state).toBe('cancelled');
        expect(record.history.at(-1)?.message).toBe(`superseded by ${by.id}`);
        expect(await queue.getJob(old.id)).toBeUndefined();
      }
      for (const kept of [c, other, plain]) expect((await store.get(kept.id))!.state).toBe('queued');
      expect(await redis.get(keys.supersedeLatest(c.lane, 'acme/web#1'))).toBe(c.id);
      expect(await redis.pttl(keys.supersedeLatest(c.lane, 'acme/web#1'))).toBeGreaterThan(0);
      // c runs, as a worker holds it: BullMQ's lock under the run's token, the card moved to running.
      const run = async (x: Card) => {
        await redis.set(keys.jobLock(x.lane, x.id), 'tok');
        expect((await store.transition(x, { to: 'running', attempt: 1, sandboxId: 'sb-1', message: 'slot s' }, { kind: 'run', token: 'tok' })).ok).toBe(true);
      };
      await run(c);
      // A newer card with cancel-running asks it to stop, saying why.
      const d = card({ supersedeKey: 'acme/web#1', supersede: 'cancel-running' });
      await queues.enqueue(d);
      expect(await redis.hmget(keys.card(c.id), 'state', 'cancelReason')).toEqual(['running', `superseded by ${d.id}`]);
      expect(await redis.hget(keys.card(c.id), 'cancelRequestedAt')).not.toBeNull();
      // By default (the lane's "queued"), a running card is left to finish.
      const first = card({ supersedeKey: 'acme/web#3' });
      await queues.enqueue(first);
      await run(first);
      await queues.enqueue(card({ supersedeKey: 'acme/web#3' }));
      expect(await redis.hmget(keys.card(first.id), 'state', 'cancelRequestedAt', 'cancelReason')).toEqual(['running', null, null]);
    },
  );

  it("enqueueMany with BullMQ's add writes the records and the jobs in one MULTI: one round trip, atomic", async () => {
    const { queues, queue, card } = laneQueues({ writeJobs: false });
    // Scripts loaded first (ioredis loads a script it has not sent before in a round trip of its own).
    await queues.enqueueMany([card({ priority: 1 }), card()]);
    const [urgent, plain] = [card({ priority: 1 }), card()];
    // MULTI, lanesEnqueue (the records), the two adds, lanesEnqueueRelease, EXEC.
    expect(await commandsOf(() => queues.enqueueMany([urgent, plain]))).toEqual(['multi', 'evalsha', 'evalsha', 'evalsha', 'evalsha', 'exec']);
    expect(await (await queue.getJob(urgent.id))!.getState()).toBe('prioritized');
    expect(await (await queue.getJob(plain.id))!.getState()).toBe('waiting');
  });

  it('a batch, or one card, plain or prioritized, is one script call: records and jobs', async () => {
    const { queues, queue, card } = laneQueues();
    await queues.enqueueMany([card(), card()]);
    const batch = [card(), card({ priority: 1 }), card()];
    expect(await commandsOf(() => queues.enqueueMany(batch))).toEqual(['evalsha']);
    const [single, urgent] = [card(), card({ priority: 5 })];
    expect(await commandsOf(() => queues.enqueue(single))).toEqual(['evalsha']);
    expect(await commandsOf(() => queues.enqueue(urgent))).toEqual(['evalsha']);
    for (const c of [...batch, single, urgent]) expect(await (await queue.getJob(c.id))!.getState()).toBe(c.priority ? 'prioritized' : 'waiting');
  });

  it('a batch writes the same record, history entry and event as a single enqueue, callbackUrl flag included', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const hook = { callbackUrl: 'https://board.example/hook', metadata: { k: 1 } };
    const [single, batched] = [card(hook), card(hook)];
    const [plainSingle, plainBatched] = [card(), card()];
    await queues.enqueue(single);
    await queues.enqueue(plainSingle);
    await queues.enqueueMany([batched, plainBatched]);
    const record = async (c: Card) => {
      const { card: json, createdAt, updatedAt, ...rest } = await redis.hgetall(keys.card(c.id));
      expect(createdAt).toBe(updatedAt);
      return { ...rest, card: JSON.parse(json!) as unknown } as Record<string, unknown>;
    };
    expect(await record(batched)).toEqual({ ...(await record(single)), card: batched });
    expect(await record(plainBatched)).toEqual({ ...(await record(plainSingle)), card: plainBatched });
    expect((await record(batched)).callback).toBe('1');
    expect((await record(plainBatched)).callback).toBe('0');
    const history = async (c: Card) => (await store.get(c.id))!.history.map(({ at: _at, ...h }) => h);
    expect(await history(batched)).toEqual(await history(single));
    const event = async (c: Card) => (await events.recent(1_000)).filter((e) => e.cardId === c.id).map(({ at: _at, id: _id, ...e }) => e);
    expect(await event(batched)).toEqual([{ type: 'card.queued', lane: lane.name, cardId: batched.id }]);
    expect(await event(single)).toEqual([{ type: 'card.queued', lane: lane.name, cardId: single.id }]);
    expect((await queue.getJob(batched.id))!.opts).toEqual({ ...(await queue.getJob(single.id))!.opts, jobId: batched.id });
    expect((await queue.getJob(batched.id))!.data).toEqual(batched);
  });

  it('enqueue on an unknown lane throws', async () => {
    const { queues, card } = laneQueues();
    await expect(queues.enqueue(card({ lane: uid('other') }))).rejects.toThrow(/unknown lane/);
  });

  it('cancel of a queued card removes its job and marks it cancelled', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    expect(await queues.cancel(c.id)).toEqual({ ok: true, state: 'cancelled' });
    expect(await queue.getJob(c.id)).toBeUndefined();
    expect(await redis.exists(jobKey(lane.name, c.id))).toBe(0);
    const record = (await store.get(c.id))!;
    expect(record.state).toBe('cancelled');
    expect(record.history.map((h) => h.state)).toEqual(['queued', 'cancelled']);
    expect(await eventTypes(c.id)).toEqual(['card.queued', 'card.cancelled']);
  });

  it('cancel of a terminal card is CARD_STATE; of an unknown id CARD_NOT_FOUND', async () => {
    const { queues, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    await queues.cancel(c.id);
    expect(await queues.cancel(c.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'cancelled' });
    const d = card();
    await store.create(d);
    const run = await runAs(d, 't2');
    await store.transition(d, { to: 'running', attempt: 2, sandboxId: 'sb' }, run);
    await store.transition(d, { to: 'failed', attempt: 2, failedReason: 'command-failed' }, run);
    expect(await queues.cancel(d.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'failed' });
    expect(await queues.cancel(uid('missing'))).toMatchObject({ ok: false, code: 'CARD_NOT_FOUND' });
  });

  it('cancel of a running card (active job) keeps the job and tells the slot through pub/sub', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    const worker = handWorker(lane.name);
    const job = await worker.getNextJob('test-token');
    expect(job?.id).toBe(c.id);
    expect(await store.transition(c, { to: 'running', attempt: 1, sandboxId: 'sb-1' }, { kind: 'run', token: 'test-token' })).toMatchObject({ ok: true });

    const sub = createRedis(server.url);
    closers.push(async () => sub.disconnect());
    const heard: string[] = [];
    sub.on('message', (_channel: string, message: string) => heard.push(message));
    await sub.subscribe(keys.cancelChannel());

    expect(await queues.cancel(c.id)).toEqual({ ok: true, state: 'running' });
    await waitFor('cancel message', () => heard.includes(c.id), { timeoutMs: 5_000 });
    expect(await (await queue.getJob(c.id))!.getState()).toBe('active');
    expect((await store.get(c.id))!.state).toBe('running');
  });

  it('cancel of a card left running by a vanished run (its job waiting again) cancels it as that run', async () => {
    const { queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    await store.transition(c, { to: 'running', attempt: 1, sandboxId: 'sb-gone' }, await runAs(c, 'gone'));
    // The lock lapsed with its worker; the stalled check put the job back to waiting.
    await redis.del(keys.jobLock(c.lane, c.id));
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');

    expect(await queues.cancel(c.id)).toEqual({ ok: true, state: 'cancelled' });
    expect(await queue.getJob(c.id)).toBeUndefined();
    expect((await store.get(c.id))!.history.map((h) => h.state)).toEqual(['queued', 'running', 'cancelled']);
  });

  it('redrive promotes a delayed job to waiting and records the card queued with card.redriven', async () => {
    const { lane, queues, queue, blockedCard } = laneQueues();
    const c = await blockedCard();
    expect(await (await queue.getJob(c.id))!.getState()).toBe('delayed');
    expect((await store.blocked(lane.name)).map((b) => b.id)).toEqual([c.id]);

    const record = (await store.get(c.id))!;
    expect(await queues.redrive(record, 'card.redriven', 'replacement live')).toBe(true);
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');
    const after = (await store.get(c.id))!;
    expect(after.state).toBe('queued');
    expect(after.blockedReason).toBeUndefined();
    expect(after.history.at(-1)).toMatchObject({ state: 'queued', attempt: 1, message: 'replacement live' });
    expect(await store.blocked(lane.name)).toEqual([]);
    expect((await eventTypes(c.id)).at(-1)).toBe('card.redriven');

    // Safe to call twice: nothing is delayed any more, so nothing changes.
    expect(await queues.redrive(after, 'card.redriven', 'again')).toBe(false);
    expect((await store.get(c.id))!.history).toHaveLength(after.history.length);
    // No job at all: nothing to re-drive.
    expect(await queues.redrive({ id: uid('nojob'), lane: lane.name, attempts: 0 }, 'card.redriven', 'x')).toBe(false);
  });

  it('two re-drives of one card race: the one that finds it already queued writes nothing (one queued entry, one event)', async () => {
    const { queues, queue, blockedCard } = laneQueues();
    const c = await blockedCard();
    // Both read the card blocked and its job delayed; the worker's re-drive (sandbox live) moves the card first...
    const read = (await store.get(c.id))!;
    await store.transition(c, { to: 'queued', attempt: 1, event: 'card.redriven', message: 'sandbox-live' }, board);
    const before = (await store.get(c.id))!;
    const eventsBefore = await eventTypes(c.id);
    // ...and the supervisor's sweep, a step behind, finds the job still delayed.
    expect(await (await queue.getJob(c.id))!.getState()).toBe('delayed');
    expect(await queues.redrive(read, 'card.redriven', 'supervisor sweep')).toBe(false);
    const after = (await store.get(c.id))!;
    expect(after.history.map((h) => h.state)).toEqual(['queued', 'blocked', 'queued']);
    expect(after.updatedAt).toBe(before.updatedAt);
    expect(await eventTypes(c.id)).toEqual(eventsBefore);
  });

  it.each([true, false])(
    "a re-driven card is the next job BullMQ's worker takes, ahead of the cards queued meanwhile (writeJobs %s: only lanes' writer knows the wait list)",
    async (writeJobs) => {
      const { lane, queues, card, blockedCard } = laneQueues({ writeJobs });
      const c = await blockedCard();
      const backlog = [card(), card(), card()];
      expect((await queues.enqueueMany(backlog)).ok).toBe(true);

      expect(await queues.redrive((await store.get(c.id))!, 'card.redriven', 'replacement live')).toBe(true);
      const worker = handWorker(lane.name);
      const taken: string[] = [];
      for (let i = 0; i < 4; i++) taken.push((await worker.getNextJob(`token-${i}`))!.id!);
      // Under another BullMQ the promote's own order stands: the backlog first, as before.
      expect(taken).toEqual(writeJobs ? [c.id, ...backlog.map((b) => b.id)] : [...backlog.map((b) => b.id), c.id]);
    },
  );

  it('redriveBlocked re-drives what the policy picks and is still blocked, in its order, with the caller named in the history', async () => {
    const { lane, queues, blockedCard } = laneQueues();
    const [a, b, skipped] = [await blockedCard(), await blockedCard(), await blockedCard()];
    const listed = await store.blocked(lane.name);
    // b is no longer blocked when its turn comes (a human unblocked it meanwhile): left alone.
    expect(await queues.unblock(b.id)).toEqual({ ok: true, state: 'queued' });
    const seen: string[] = [];
    const out = await queues.redriveBlocked(
      lane.name,
      listed,
      (cards) => {
        seen.push(...cards.map((c) => `${c.lane}/${c.id}`));
        return { action: 'redrive', ids: [b.id, a.id], reason: 'a slot is live' };
      },
      'by the test',
    );
    expect(seen.sort()).toEqual([a, b, skipped].map((c) => `${lane.name}/${c.id}`).sort());
    expect(out).toEqual({ ids: [a.id], reason: 'a slot is live' });
    expect((await store.get(a.id))!.history.at(-1)).toMatchObject({ state: 'queued', message: 'by the test: a slot is live' });
    expect((await store.get(skipped.id))!.state).toBe('blocked');
    expect(await queues.redriveBlocked(lane.name, listed, () => ({ action: 'none', reason: 'nothing to do' }), 'by the test')).toEqual({ ids: [], reason: 'nothing to do' });
  });

  it('unblock re-queues a blocked (delayed) card as card.unblocked and keeps its attempts', async () => {
    const { queues, queue, blockedCard } = laneQueues();
    const c = await blockedCard(NEEDS_HUMAN);

    expect(await queues.unblock(c.id, 'use main')).toEqual({ ok: true, state: 'queued' });
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');
    const record = (await store.get(c.id))!;
    expect(record).toMatchObject({ state: 'queued', attempts: 2 });
    expect(record.blockedReason).toBeUndefined();
    expect(record.history.at(-1)).toMatchObject({ state: 'queued', attempt: 2, message: 'unblocked: use main' });
    expect((await eventTypes(c.id)).at(-1)).toBe('card.unblocked');
  });

  it('unblock is only for blocked cards; unknown ids are CARD_NOT_FOUND', async () => {
    const { queues, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    expect(await queues.unblock(c.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'queued' });
    const run = await runAs(c, 't3');
    await store.transition(c, { to: 'running', attempt: 1, sandboxId: 'sb' }, run);
    expect(await queues.unblock(c.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'running' });
    await store.transition(c, { to: 'done', attempt: 1 }, run);
    expect(await queues.unblock(c.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'done' });
    expect(await queues.unblock(uid('missing'))).toMatchObject({ ok: false, code: 'CARD_NOT_FOUND' });
  });

  it('unblock that loses the race to another writer answers the state the card is in now, not blocked', async () => {
    const { queues, blockedCard } = laneQueues();
    const c = await blockedCard({ ...NEEDS_HUMAN, attempt: 1 });
    // A second unblock moves the card after this one has read it blocked, before this one moves it.
    const fetch = queues.job.bind(queues);
    queues.job = async (cardId, laneName) => {
      await store.transition(c, { to: 'queued', attempt: 1, event: 'card.unblocked', message: 'unblocked: by the other' }, board);
      return fetch(cardId, laneName);
    };
    expect(await queues.unblock(c.id, 'mine')).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'queued' });
    expect((await store.get(c.id))!.history.map((h) => `${h.state}: ${h.message}`)).toEqual(['queued: enqueued', 'blocked: which branch?', 'queued: unblocked: by the other']);
  });

  it('unblock does not claim success when the job could not be re-queued (still active)', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    const worker = handWorker(lane.name);
    expect((await worker.getNextJob('test-token'))?.id).toBe(c.id);
    // The worker recorded blocked but has not moved the job to delayed yet.
    await store.transition(c, { to: 'blocked', attempt: 1, blockedReason: 'needs-human', message: 'help', retryAt: Date.now() + 60_000 }, { kind: 'run', token: 'test-token' });

    expect(await queues.unblock(c.id)).toMatchObject({ ok: false, code: 'CARD_STATE', state: 'blocked' });
    const record = (await store.get(c.id))!;
    expect(record.state).toBe('blocked');
    expect(await (await queue.getJob(c.id))!.getState()).toBe('active');
  });

  it('unblock waits out the hand-over: a job moved to delayed moments later is re-queued', async () => {
    const { lane, queues, queue, card } = laneQueues();
    const c = card();
    await queues.enqueue(c);
    const worker = handWorker(lane.name);
    const job = (await worker.getNextJob('test-token'))!;
    await store.transition(c, { to: 'blocked', attempt: 1, blockedReason: 'needs-human', message: 'help', retryAt: Date.now() + 60_000 }, { kind: 'run', token: 'test-token' });

    // Watch the states unblock itself reads, so the hand-over happens only after it has seen the job active.
    const seen: string[] = [];
    const fetch = queues.job.bind(queues);
    queues.job = async (cardId, laneName) => {
      const found = await fetch(cardId, laneName);
      if (found) {
        const read = found.getState.bind(found);
        found.getState = async () => {
          const state = await read();
          seen.push(state);
          return state;
        };
      }
      return found;
    };
    const unblocking = queues.unblock(c.id);
    // The worker finishes its hand-over while unblock is waiting for it.
    await waitFor('unblock to have seen the job still active', () => seen.includes('active'));
    await job.moveToDelayed(Date.now() + 60_000, 'test-token');
    expect(await unblocking).toEqual({ ok: true, state: 'queued' });
    expect(await (await queue.getJob(c.id))!.getState()).toBe('waiting');
    expect((await store.get(c.id))!.state).toBe('queued');
  });
});
