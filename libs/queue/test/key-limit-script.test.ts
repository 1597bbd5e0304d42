import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_LIMIT_WAITING, type Card } from '@lanes/contracts';
import { CardStore, KeyLimits, createRedis, keys, type KeyedCard } from '@lanes/queue';
import { evaluateKeyAdmission, type KeyAdmissionSnapshot } from '@lanes/supervision';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const LOCK_MS = 30_000;
const NOW = 1_700_000_000_000;
const MAX = 2;

/** The Lua of key-limit-script.ts on a real redis-server: the admission table, the race, release, recheck, and the move hook. */
describe('key-limit scripts (real Redis)', () => {
  let server: TestRedis;
  let redis: Redis;
  let other: Redis;
  let store: CardStore;
  let limits: KeyLimits;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    other = createRedis(server.url);
    store = new CardStore({ redis, now: Date.now });
    limits = new KeyLimits(redis);
  });
  afterAll(async () => {
    redis?.disconnect();
    other?.disconnect();
    await server?.stop();
  });

  const uid = () => randomBytes(4).toString('hex');
  /** A card of `key` on `lane` with a record and, unless told otherwise, its job's lock held under `token`. */
  async function cardOf(lane: string, key: string, lock: string | null = 'tok'): Promise<{ card: Card; keyed: KeyedCard }> {
    const card: Card = { id: `c-${uid()}`, lane, title: 'keyed', priority: 0, concurrencyKey: key };
    await store.create(card);
    if (lock) await redis.set(keys.jobLock(lane, card.id), lock, 'PX', LOCK_MS);
    return { card, keyed: { lane, cardId: card.id, key } };
  }

  describe('the admission agrees with evaluateKeyAdmission', () => {
    it.each<[string, KeyAdmissionSnapshot]>([
      ['no other card runs', { lock: 'this-run', counted: false, runningOthers: 0 }],
      ['one below the limit', { lock: 'this-run', counted: false, runningOthers: MAX - 1 }],
      ['at the limit', { lock: 'this-run', counted: false, runningOthers: MAX }],
      ['at the limit, counted already (a takeover)', { lock: 'this-run', counted: true, runningOthers: MAX }],
      ['another run holds the job', { lock: 'another-run', counted: false, runningOthers: 0 }],
      ['the lock lapsed', { lock: 'none', counted: false, runningOthers: 0 }],
    ])('%s', async (_name, s) => {
      const lane = `l-${uid()}`;
      const key = 'owner/repo';
      for (let i = 0; i < s.runningOthers; i++) {
        const o = await cardOf(lane, key, `other-${i}`);
        await redis.sadd(keys.keyRunning(lane, key), o.card.id);
      }
      const { card, keyed } = await cardOf(lane, key, s.lock === 'none' ? null : s.lock === 'this-run' ? 'tok' : 'theirs');
      if (s.counted) await redis.sadd(keys.keyRunning(lane, key), card.id);
      const got = await limits.admit(keyed, 'tok', MAX, NOW);
      expect(got.decision).toBe(evaluateKeyAdmission(s, { maxRunningPerKey: MAX, parkBackstopMs: 1 }, NOW).action);
      if (s.lock === 'this-run') expect(got.runningOthers).toBe(s.runningOthers);
    });

    it('answers no-record for a job with no card record', async () => {
      const lane = `l-${uid()}`;
      await redis.set(keys.jobLock(lane, 'bare'), 'tok');
      expect((await limits.admit({ lane, cardId: 'bare', key: 'k' }, 'tok', 1, NOW)).decision).toBe('no-record');
    });
  });

  it('counts atomically: two workers racing 40 admissions of one key admit exactly maxRunningPerKey', async () => {
    const lane = `l-${uid()}`;
    const key = 'acme/widgets';
    const cards = await Promise.all(Array.from({ length: 40 }, () => cardOf(lane, key)));
    const workers = [new KeyLimits(redis), new KeyLimits(other)];
    const replies = await Promise.all(cards.map((c, i) => workers[i % 2]!.admit(c.keyed, 'tok', MAX, NOW + i)));
    expect(replies.filter((r) => r.decision === 'admit')).toHaveLength(MAX);
    expect(replies.filter((r) => r.decision === 'park')).toHaveLength(40 - MAX);
    expect(await redis.scard(keys.keyRunning(lane, key))).toBe(MAX);
    expect((await limits.parkedCounts(lane)).concurrency).toBe(40 - MAX);
    // A parked card says so in its record, and stays queued.
    const parked = cards.find((_, i) => replies[i]!.decision === 'park')!;
    expect(await store.get(parked.card.id)).toMatchObject({ state: 'queued', stateDetail: KEY_LIMIT_WAITING });
    const admitted = cards.find((_, i) => replies[i]!.decision === 'admit')!;
    expect((await store.get(admitted.card.id))?.stateDetail).toBeUndefined();
  });

  it('wakes parked cards in the order they first waited, and keeps a re-parked card its place', async () => {
    const lane = `l-${uid()}`;
    const key = 'k';
    const running = await cardOf(lane, key);
    expect((await limits.admit(running.keyed, 'tok', 1, NOW)).decision).toBe('admit');
    const first = await cardOf(lane, key);
    const second = await cardOf(lane, key);
    expect((await limits.admit(first.keyed, 'tok', 1, NOW + 1)).decision).toBe('park');
    expect((await limits.admit(second.keyed, 'tok', 1, NOW + 2)).decision).toBe('park');
    // first, taken again by its backstop, re-parks later in time but keeps its first waiting time.
    expect((await limits.admit(first.keyed, 'tok', 1, NOW + 3)).decision).toBe('park');
    expect(await limits.release(running.keyed, 'tok')).toBe(first.card.id);
    expect(await redis.scard(keys.keyRunning(lane, key))).toBe(0);
    expect(await limits.release(running.keyed, 'tok')).toBe(second.card.id);
    expect(await limits.release(running.keyed, 'tok')).toBeUndefined();
  });

  it('leaves the count to the run that took the card over: a fenced run releases nothing', async () => {
    const lane = `l-${uid()}`;
    const { keyed } = await cardOf(lane, 'k');
    expect((await limits.admit(keyed, 'tok', 1, NOW)).decision).toBe('admit');
    await redis.set(keys.jobLock(lane, keyed.cardId), 'new-run');
    expect(await limits.release(keyed, 'tok')).toBeUndefined();
    expect(await redis.sismember(keys.keyRunning(lane, 'k'), keyed.cardId)).toBe(1);
  });

  it('does not leak a crashed worker’s place: a member whose job lock is gone is not counted, and is dropped', async () => {
    const lane = `l-${uid()}`;
    const crashed = await cardOf(lane, 'k');
    expect((await limits.admit(crashed.keyed, 'tok', 1, NOW)).decision).toBe('admit');
    const next = await cardOf(lane, 'k');
    expect((await limits.admit(next.keyed, 'tok', 1, NOW)).decision).toBe('park');
    // The crashed worker's lock lapses (BullMQ's stalled check hands the job on).
    await redis.del(keys.jobLock(lane, crashed.card.id));
    expect((await limits.admit(next.keyed, 'tok', 1, NOW)).decision).toBe('admit');
    expect(await redis.smembers(keys.keyRunning(lane, 'k'))).toEqual([next.card.id]);
  });

  it('rechecks a parked card: wake with room, stay (back in line) without, gone once admitted', async () => {
    const lane = `l-${uid()}`;
    const running = await cardOf(lane, 'k');
    await limits.admit(running.keyed, 'tok', 1, NOW);
    const parked = await cardOf(lane, 'k');
    expect((await limits.admit(parked.keyed, 'tok', 1, NOW)).decision).toBe('park');
    // A release that popped it while its job was not yet delayed: with no room, it goes back in line.
    await redis.zrem(keys.keyWaiting(lane, 'k'), parked.card.id);
    await redis.set(keys.jobLock(lane, 'squatter'), 'x');
    await redis.sadd(keys.keyRunning(lane, 'k'), 'squatter');
    await redis.srem(keys.keyRunning(lane, 'k'), running.card.id);
    expect(await limits.recheck(parked.keyed, 1)).toBe('stay');
    expect(await redis.zscore(keys.keyWaiting(lane, 'k'), parked.card.id)).toBe(String(NOW));
    await redis.srem(keys.keyRunning(lane, 'k'), 'squatter');
    expect(await limits.recheck(parked.keyed, 1)).toBe('wake');
    expect((await limits.admit(parked.keyed, 'tok', 1, NOW)).decision).toBe('admit');
    expect(await limits.recheck(parked.keyed, 1)).toBe('gone');
  });

  it('a parked card that moves on (cancelled) leaves both sets and its detail', async () => {
    const lane = `l-${uid()}`;
    const running = await cardOf(lane, 'k');
    await limits.admit(running.keyed, 'tok', 1, NOW);
    const parked = await cardOf(lane, 'k');
    expect((await limits.admit(parked.keyed, 'tok', 1, NOW)).decision).toBe('park');
    expect(await limits.parkedAmong(lane, [parked.card.id, running.card.id])).toEqual(new Set([parked.card.id]));
    expect(await limits.parkedAmong(lane, [])).toEqual(new Set());
    expect((await store.transition(parked.card, { to: 'cancelled', attempt: 0, message: 'cancelled before it ran' }, { kind: 'board' })).ok).toBe(true);
    expect(await limits.parkedCounts(lane)).toEqual({ concurrency: 0, supersede: 0 });
    expect(await redis.zcard(keys.keyWaiting(lane, 'k'))).toBe(0);
    expect(await redis.hmget(keys.card(parked.card.id), 'stateDetail', 'keyWaiting', 'keyParked', 'keyWaitingSince')).toEqual([null, null, null, null]);
  });

  it('moves a woken card to the end of the wait list that workers take from', async () => {
    const lane = `l-${uid()}`;
    await redis.lpush(keys.waitList(lane), 'woken', 'b', 'a');
    await limits.toFront(lane, 'woken');
    expect(await redis.lrange(keys.waitList(lane), 0, -1)).toEqual(['a', 'b', 'woken']);
  });

  describe('heldBack: the ready cards a worker would only park, for the scale endpoint', () => {
    /** Ready cards as the queue holds them: `wait` in the order workers take them (pushed on the left), `prioritized` by score. */
    async function ready(lane: string, wait: Array<Partial<Card>>, prioritized: Array<Partial<Card>> = []): Promise<string[]> {
      const ids: string[] = [];
      for (const [i, over] of [...wait, ...prioritized].entries()) {
        const card: Card = { id: `r-${uid()}`, lane, title: 'ready', priority: 0, ...over };
        if (!over.id) await store.create(card);
        ids.push(card.id);
        if (i < wait.length) await redis.lpush(keys.waitList(lane), card.id);
        else await redis.zadd(keys.prioritizedSet(lane), i, card.id);
      }
      return ids;
    }

    it('counts, in the order cards are taken, those whose key has no place left, the places a card ahead takes included', async () => {
      const lane = `l-${uid()}`;
      // One card of a runs already (its lock held); 3 more of a wait, with 2 of b and 1 without a key.
      const runningA = await cardOf(lane, 'a');
      await redis.sadd(keys.keyRunning(lane, 'a'), runningA.card.id);
      await ready(lane, [{ concurrencyKey: 'a' }, { concurrencyKey: 'b' }, {}, { concurrencyKey: 'b' }], [{ concurrencyKey: 'a' }, { concurrencyKey: 'a' }]);
      // Limit 2: one more of a fits, then a is full (2 held); b fits twice.
      expect(await limits.heldBack(lane, 2, 100)).toBe(2);
      // Limit 1: a is full (3 held), b fits once (1 held).
      expect(await limits.heldBack(lane, 1, 100)).toBe(4);
      // No concurrency limit on the lane: nothing is held back by its concurrency keys.
      expect(await limits.heldBack(lane, undefined, 100)).toBe(0);
    });

    it('a running-set member whose lock is gone (its worker crashed) takes no place; a board job with no record runs', async () => {
      const lane = `l-${uid()}`;
      const crashed = await cardOf(lane, 'a', null);
      await redis.sadd(keys.keyRunning(lane, 'a'), crashed.card.id);
      await ready(lane, [{ concurrencyKey: 'a' }, { id: 'board-own-job', concurrencyKey: 'a' }]);
      expect(await limits.heldBack(lane, 1, 100)).toBe(0);
    });

    it('a supersede key holds one place on any lane', async () => {
      const lane = `l-${uid()}`;
      const older = await cardOf(lane, 'x');
      await redis.sadd(keys.supersedeRunning(lane, 'acme/web#1'), older.card.id);
      await ready(lane, [{ supersedeKey: 'acme/web#1' }, { supersedeKey: 'acme/web#2' }, { supersedeKey: 'acme/web#2' }]);
      expect(await limits.heldBack(lane, undefined, 100)).toBe(2);
    });

    it('stops once enough could run (more demand changes nothing), and reads at most its cap', async () => {
      const lane = `l-${uid()}`;
      await ready(lane, [{}, {}, { concurrencyKey: 'a' }, { concurrencyKey: 'a' }, { concurrencyKey: 'a' }]);
      expect(await limits.heldBack(lane, 1, 2)).toBe(0);
      expect(await limits.heldBack(lane, 1, 100)).toBe(2);
      // Read 4 of 5: the last card, past the cap, counts as one that runs.
      expect(await limits.heldBack(lane, 1, 100, 4)).toBe(1);
    });
  });
});
