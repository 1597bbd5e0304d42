import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaults, isTerminalCardState, parseLanesConfig, type Card } from '@lanes/contracts';
import { CardStore, EndedJobDataSchema, LaneQueues, QUEUE_PREFIX, appendJobLog, createRedis, keys, type CardMove, type CardWriter } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;
const DAY_MS = defaults.MS_PER_DAY;

/** Retention and the history cap, as the transition script applies them on a real redis-server. */
describe('card retention in the transition script', () => {
  let server: TestRedis;
  let redis: Redis;
  const oneDayLane = uid('lane');
  let store: CardStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    store = new CardStore({ redis, now: Date.now, lanes: [{ name: oneDayLane, retention: { terminalCardDays: 1 } }], historyMaxEntries: 5 });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (lane = oneDayLane): Card => ({ id: uid('card'), lane, title: 't', priority: 0 });
  /** What a worker holding the card's job has: BullMQ's lock, the job hash and a log line. */
  const takeJob = async (card: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(card.lane, card.id), token);
    await redis.hset(keys.job(card.lane, card.id), 'name', card.lane, 'data', JSON.stringify(card));
    await redis.rpush(keys.jobLogs(card.lane, card.id), 'line 1');
    return { kind: 'run', token };
  };
  /** The card's own keys: record, history, job hash and logs (each PTTL), and its takeover sets. */
  const owned = (card: Card) => [keys.card(card.id), keys.history(card.id), keys.job(card.lane, card.id), keys.jobLogs(card.lane, card.id)];
  const pttls = async (card: Card) => Promise.all(owned(card).map((k) => redis.pttl(k)));
  const runToEnd = async (card: Card, end: CardMove) => {
    await store.create(card);
    const writer = await takeJob(card, uid('tok'));
    expect((await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer)).ok).toBe(true);
    // A takeover judged earlier left these; an ended card keeps neither.
    await redis.sadd(keys.crashSuspects(card.id), 'old-run');
    await redis.sadd(keys.fencedRuns(card.id), 'older-run');
    expect(await pttls(card)).toEqual([-1, -1, -1, -1]);
    expect((await store.transition(card, end, writer)).ok).toBe(true);
  };

  it.each<[string, CardMove]>([
    ['done', { to: 'done', attempt: 1, sandboxId: 'sb', result: { pr: 'x' } }],
    ['failed', { to: 'failed', attempt: 1, sandboxId: 'sb', failedReason: 'command-failed' }],
    ['cancelled', { to: 'cancelled', attempt: 1, sandboxId: 'sb' }],
  ])('a move to %s sets the lane’s retention on every key the card owns, in the same script', async (_name, end) => {
    const card = newCard();
    await runToEnd(card, end);
    for (const ttl of await pttls(card)) {
      expect(ttl).toBeGreaterThan(DAY_MS - 60_000);
      expect(ttl).toBeLessThanOrEqual(DAY_MS);
    }
    expect(await redis.exists(keys.crashSuspects(card.id), keys.fencedRuns(card.id))).toBe(0);
    expect(await redis.zscore(keys.blocked(card.lane), card.id)).toBeNull();
  });

  it.each<[string, CardMove]>([
    ['done', { to: 'done', attempt: 1, sandboxId: 'sb', result: { pr: 'x' } }],
    ['failed', { to: 'failed', attempt: 1, sandboxId: 'sb', failedReason: 'command-failed' }],
    ['cancelled', { to: 'cancelled', attempt: 1, sandboxId: 'sb' }],
  ])('a move to %s leaves the card in its record alone: the job’s data becomes the ended-job stub', async (name, end) => {
    const card = newCard();
    await runToEnd(card, end);
    const data: unknown = JSON.parse((await redis.hget(keys.job(card.lane, card.id), 'data'))!);
    expect(EndedJobDataSchema.parse(data)).toEqual({ ended: name, id: card.id });
    expect((await store.get(card.id))?.title).toBe(card.title);
  });

  it('moves that do not end the card leave the job’s data whole; an end makes no job that BullMQ removed', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await takeJob(card, uid('tok'));
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
    expect(JSON.parse((await redis.hget(keys.job(card.lane, card.id), 'data'))!)).toEqual(card);
    await redis.del(keys.job(card.lane, card.id));
    await store.transition(card, { to: 'done', attempt: 1, sandboxId: 'sb' }, writer);
    expect(await redis.exists(keys.job(card.lane, card.id))).toBe(0);
  });

  it('with trimEndedJobs off (a BullMQ lanes did not check), an end leaves the job’s data whole', async () => {
    const untrimmed = new CardStore({ redis, now: Date.now, lanes: [{ name: oneDayLane, retention: { terminalCardDays: 1 } }], trimEndedJobs: false });
    const card = newCard();
    await untrimmed.create(card);
    const writer = await takeJob(card, uid('tok'));
    await untrimmed.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
    await untrimmed.transition(card, { to: 'done', attempt: 1, sandboxId: 'sb' }, writer);
    expect(JSON.parse((await redis.hget(keys.job(card.lane, card.id), 'data'))!)).toEqual(card);
  });

  it('a lane the store was not told of gets the default retention', async () => {
    const card = newCard(uid('other-lane'));
    await runToEnd(card, { to: 'done', attempt: 1, sandboxId: 'sb' });
    const defaultMs = defaults.DEFAULT_TERMINAL_CARD_RETENTION_DAYS * DAY_MS;
    for (const ttl of await pttls(card)) {
      expect(ttl).toBeGreaterThan(defaultMs - 60_000);
      expect(ttl).toBeLessThanOrEqual(defaultMs);
    }
  });

  it('moves that do not end the card (queued, running, blocked) set no expiry', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await takeJob(card, uid('tok'));
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
    await store.transition(card, { to: 'blocked', attempt: 1, sandboxId: 'sb', blockedReason: 'needs-human', retryAt: Date.now() + 60_000 }, writer);
    await store.transition(card, { to: 'queued', attempt: 1, event: 'card.unblocked' }, { kind: 'board' });
    expect(await pttls(card)).toEqual([-1, -1, -1, -1]);
  });

  it('a retry (the one move out of a terminal state) persists what the terminal move set to expire', async () => {
    const card = newCard();
    await runToEnd(card, { to: 'failed', attempt: 1, sandboxId: 'sb', failedReason: 'command-failed' });
    expect((await pttls(card)).every((t) => t > 0)).toBe(true);
    // A retry while the run still holds the job's lock is refused; BullMQ's finishing move releases it.
    await redis.del(keys.jobLock(card.lane, card.id));
    await redis.zadd(`${QUEUE_PREFIX}:${card.lane}:failed`, Date.now(), card.id);
    expect(await store.retry(card, { message: 'retried', job: { kind: 'clear' } })).toEqual({ ok: true });
    // The job hash went with the finished job (the caller adds the new one); the rest no longer expires.
    expect(await redis.exists(keys.job(card.lane, card.id))).toBe(0);
    expect(await Promise.all([keys.card(card.id), keys.history(card.id), keys.jobLogs(card.lane, card.id)].map((k) => redis.pttl(k)))).toEqual([-1, -1, -1]);
  });

  it('a fenced worker’s late word on a finished card keeps nothing (no set outlives the card)', async () => {
    const card = newCard();
    await runToEnd(card, { to: 'done', attempt: 1, sandboxId: 'sb' });
    await store.markFenced(card.id, 'late-run');
    expect(await redis.exists(keys.crashSuspects(card.id), keys.fencedRuns(card.id))).toBe(0);
    // While the card runs, the word is kept as before.
    const running = newCard();
    await store.create(running);
    await store.transition(running, { to: 'running', attempt: 1, sandboxId: 'sb' }, await takeJob(running, 'tok-a'));
    await store.markFenced(running.id, 'tok-a');
    expect(await redis.smembers(keys.fencedRuns(running.id))).toEqual(['tok-a']);
  });

  it('a job log begun after the card ended takes the job’s expiry', async () => {
    const card = newCard();
    await runToEnd(card, { to: 'done', attempt: 1, sandboxId: 'sb' });
    await redis.del(keys.jobLogs(card.lane, card.id));
    expect(await appendJobLog(redis, card.lane, card.id, ['late line'])).toBe(1);
    const ttl = await redis.pttl(keys.jobLogs(card.lane, card.id));
    expect(ttl).toBeGreaterThan(DAY_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(DAY_MS);
  });

  it('a history past the cap keeps its first and newest entries and counts the rest; the terminal entry stays, once', async () => {
    const card = newCard();
    await store.create(card);
    const board: CardWriter = { kind: 'board' };
    // 1 enqueue entry + 7 re-drives = 8 entries, over a cap of 5: 3 fold away.
    for (let i = 1; i <= 7; i++) expect((await store.transition(card, { to: 'queued', attempt: 0, event: 'card.redriven', message: `redrive ${i}` }, board)).ok).toBe(true);
    let record = (await store.get(card.id))!;
    expect(record.history.map((h) => h.message)).toEqual(['enqueued', 'redrive 4', 'redrive 5', 'redrive 6', 'redrive 7']);
    expect(record.historyDropped).toBe(3);

    const writer = await takeJob(card, uid('tok'));
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
    await store.transition(card, { to: 'done', attempt: 1, sandboxId: 'sb' }, writer);
    record = (await store.get(card.id))!;
    expect(record.history.map((h) => h.message ?? h.state)).toEqual(['enqueued', 'redrive 6', 'redrive 7', 'running', 'done']);
    expect(record.historyDropped).toBe(5);
    expect(record.history.filter((h) => isTerminalCardState(h.state))).toHaveLength(1);
    expect(await redis.llen(keys.history(card.id))).toBe(5);
  });

  it('a history under the cap is whole and shows no dropped count', async () => {
    const card = newCard();
    await runToEnd(card, { to: 'done', attempt: 1, sandboxId: 'sb' });
    const record = (await store.get(card.id))!;
    expect(record.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
    expect(record).not.toHaveProperty('historyDropped');
  });

  it.each([true, false])(
    'an id whose card expired with its job, but still named in BullMQ’s finished sets, is enqueued afresh and taken out of them (writeJobs %s)',
    async (writeJobs) => {
      const [lane] = parseLanesConfig({ lanes: [{ name: uid('lane'), agent: ['true'] }] }).lanes;
      const queues = new LaneQueues({ redis, store, lanes: [lane!], writeJobs });
      try {
        const card = newCard(lane!.name);
        // What an expired card leaves: its id in the completed and failed sets, no record, no job hash.
        await redis.zadd(`${QUEUE_PREFIX}:${lane!.name}:completed`, 1, card.id);
        await redis.zadd(`${QUEUE_PREFIX}:${lane!.name}:failed`, 1, card.id);
        expect(await queues.enqueue(card)).toEqual({ created: true, id: card.id, state: 'queued' });
        expect(await redis.zscore(`${QUEUE_PREFIX}:${lane!.name}:completed`, card.id)).toBeNull();
        expect(await redis.zscore(`${QUEUE_PREFIX}:${lane!.name}:failed`, card.id)).toBeNull();
        // So BullMQ reads it as waiting, not completed (and no age or count trim of old entries removes it).
        expect(await (await queues.job(card.id, lane!.name))!.getState()).toBe('waiting');
      } finally {
        await queues.close();
      }
    },
  );

  it(`a bulk of ${defaults.MAX_BULK_CARDS} over two lanes (the per-lane writes in slices): every new card indexed queued, every expired id out of the finished sets, other ids left there`, async () => {
    const lanes = parseLanesConfig({
      lanes: [
        { name: uid('lane'), agent: ['true'] },
        { name: uid('lane'), agent: ['true'] },
      ],
    }).lanes;
    const queues = new LaneQueues({ redis, store, lanes, writeJobs: true });
    try {
      const cards = Array.from({ length: defaults.MAX_BULK_CARDS }, (_, i) => newCard(lanes[i % 2]!.name));
      for (const card of cards.filter((_, i) => i % 3 === 0)) await redis.zadd(`${QUEUE_PREFIX}:${card.lane}:completed`, 1, card.id);
      for (const lane of lanes) await redis.zadd(`${QUEUE_PREFIX}:${lane.name}:completed`, 1, `${lane.name}-someone-else`);
      const out = await queues.enqueueMany(cards);
      expect(out.ok && out.results.every((r) => r.created)).toBe(true);
      for (const lane of lanes) {
        const ids = cards.filter((c) => c.lane === lane.name).map((c) => c.id);
        expect((await redis.zrange(keys.cardIndex(lane.name, 'queued'), 0, -1)).sort()).toEqual(ids.sort());
        expect(await redis.zrange(`${QUEUE_PREFIX}:${lane.name}:completed`, 0, -1)).toEqual([`${lane.name}-someone-else`]);
      }
    } finally {
      await queues.close();
    }
  });

  describe('retention.maxCards: the oldest finished cards go first, with all they own', () => {
    /** A store over a fresh lane keeping `maxCards`, on a clock that moves a second per read (so scores never tie). */
    const boundedLane = (maxCards: number) => {
      let t = Date.now();
      const lane = uid('bounded');
      const bounded = new CardStore({ redis, now: () => (t += 1_000), lanes: [{ name: lane, retention: { terminalCardDays: 1, maxCards } }] });
      const finish = async (end: CardMove['to'] = 'done') => {
        const card = newCard(lane);
        await bounded.create(card);
        const writer = await takeJob(card, uid('tok'));
        await redis.zadd(`${QUEUE_PREFIX}:${lane}:completed`, t, card.id);
        await redis.xadd(keys.cardOutput(card.id), '*', 'l', 'line', 't', '5');
        await bounded.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
        const move: CardMove =
          end === 'failed' ? { to: 'failed', attempt: 1, sandboxId: 'sb', failedReason: 'command-failed' } : { to: end as 'done' | 'cancelled', attempt: 1, sandboxId: 'sb' };
        expect((await bounded.transition(card, move, writer)).ok).toBe(true);
        return card;
      };
      const finishedCount = async () => {
        let total = 0;
        for (const state of ['done', 'failed', 'cancelled'] as const) total += await redis.zcard(keys.cardIndex(lane, state));
        return total;
      };
      const ownedKeys = (card: Card) => [...owned(card), keys.cardOutput(card.id), keys.crashSuspects(card.id), keys.fencedRuns(card.id)];
      return { lane, bounded, finish, finishedCount, ownedKeys };
    };

    it('past 3 finished cards across done, failed and cancelled, each end removes the oldest: record, history, output, job, log, finished set; open cards stay', async () => {
      const { lane, bounded, finish, finishedCount, ownedKeys } = boundedLane(3);
      const open = newCard(lane);
      await bounded.create(open);
      const cards = [await finish('done'), await finish('failed'), await finish('cancelled'), await finish('done'), await finish('failed')];
      expect(await finishedCount()).toBe(3);
      for (const gone of cards.slice(0, 2)) {
        expect(await bounded.get(gone.id), gone.id).toBeUndefined();
        expect(await redis.exists(...ownedKeys(gone)), gone.id).toBe(0);
        expect(await redis.zscore(`${QUEUE_PREFIX}:${lane}:completed`, gone.id)).toBeNull();
      }
      for (const kept of cards.slice(2)) {
        expect((await bounded.get(kept.id))?.state, kept.id).toMatch(/done|failed|cancelled/);
        expect(await redis.exists(keys.history(kept.id), keys.job(lane, kept.id), keys.cardOutput(kept.id)), kept.id).toBe(3);
      }
      expect((await bounded.get(open.id))?.state).toBe('queued');
    });

    it('an index entry whose card is gone, or is another lane’s, only leaves the index', async () => {
      const { lane, finish, finishedCount } = boundedLane(2);
      const elsewhere = newCard();
      await runToEnd(elsewhere, { to: 'done', attempt: 1, sandboxId: 'sb' });
      // Older than any card of the lane: an expired card's entry, and a reused id now on another lane.
      await redis.zadd(keys.cardIndex(lane, 'done'), 1, 'expired-long-ago', 2, elsewhere.id);
      await finish();
      await finish();
      expect(await finishedCount()).toBe(2);
      expect((await store.get(elsewhere.id))?.state).toBe('done');
    });

    it(`after the bound is lowered, one end removes at most ${defaults.RETAINED_EVICTIONS_PER_MOVE}, and the lane converges move by move`, async () => {
      const wide = boundedLane(100);
      for (let i = 0; i < 12; i++) await wide.finish();
      const narrow = new CardStore({ redis, now: () => Date.now() + 60_000, lanes: [{ name: wide.lane, retention: { terminalCardDays: 1, maxCards: 1 } }] });
      const next = async () => {
        const card = newCard(wide.lane);
        await narrow.create(card);
        const writer = await takeJob(card, uid('tok'));
        await narrow.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer);
        await narrow.transition(card, { to: 'done', attempt: 1, sandboxId: 'sb' }, writer);
        return card;
      };
      await next();
      expect(await wide.finishedCount()).toBe(13 - defaults.RETAINED_EVICTIONS_PER_MOVE);
      const last = await next();
      expect(await wide.finishedCount()).toBe(1);
      expect((await narrow.get(last.id))?.state).toBe('done');
    });

    it('a lane the store was not given no count bound: nothing is removed', async () => {
      const { lane, finish, finishedCount } = boundedLane(100);
      for (let i = 0; i < 3; i++) await finish();
      const unaware = new CardStore({ redis, now: Date.now });
      const card = newCard(lane);
      await unaware.create(card);
      await unaware.transition(card, { to: 'cancelled', attempt: 0 }, { kind: 'board' });
      expect(await finishedCount()).toBe(4);
    });
  });

  it('refuses a cap that could not keep the first entry and the newest', () => {
    expect(() => new CardStore({ redis, now: Date.now, historyMaxEntries: 1 })).toThrow(/historyMaxEntries/);
  });
});
