import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Card, CardState } from '@lanes/contracts';
import { CardStore, createRedis, evaluateRunFence, keys, reclaimLockMsFor, type CardMove, type RunFenceSnapshot } from '@lanes/queue';
import { installedBullmqVersion } from '../src/bullmq-job-layout.js';
import { RUN_FENCE_BULLMQ_VERSION } from '../src/run-fence.js';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const LOCK_MS = 5_000;

type Row = [string, RunFenceSnapshot, 'write' | 'write+reclaim' | 'stale'];
const base: RunFenceSnapshot = { lock: 'none', state: 'running', cardRun: 'this-run', jobActive: true, to: 'done', mayReclaim: true, cancelRequested: false };
const ROWS: Row[] = [
  ['the run holds the lock', { ...base, lock: 'this-run' }, 'write'],
  ['the run holds the lock and offers no reclaim', { ...base, lock: 'this-run', mayReclaim: false }, 'write'],
  ['another run holds the lock', { ...base, lock: 'another-run' }, 'stale'],
  ['the lock lapsed and the run offers no reclaim', { ...base, mayReclaim: false }, 'stale'],
  ['the lock lapsed before the run moved to running', { ...base, state: 'queued', cardRun: 'none', to: 'running' }, 'stale'],
  ['the lock lapsed and another run has the card', { ...base, cardRun: 'another-run' }, 'stale'],
  ['the lock lapsed and the card ended meanwhile', { ...base, state: 'done', cardRun: 'none' }, 'stale'],
  ['the lock lapsed and the stalled check handed the job on', { ...base, jobActive: false }, 'stale'],
  ['the lock lapsed and a cancel was answered while the run was cut off', { ...base, cancelRequested: true }, 'stale'],
  ['the run holds the lock and a cancel waits (the run heard it, or finished first)', { ...base, lock: 'this-run', cancelRequested: true }, 'write'],
  ['the lock lapsed, the card still this run’s, the job still active: done', base, 'write+reclaim'],
  ['the same, for a failure the agent reported', { ...base, to: 'failed' }, 'write+reclaim'],
  ['the same, for needs-human', { ...base, to: 'blocked' }, 'write+reclaim'],
];

const expected = (d: ReturnType<typeof evaluateRunFence>) => (d.action === 'stale' ? 'stale' : d.reclaim ? 'write+reclaim' : 'write');

describe('evaluateRunFence', () => {
  it.each(ROWS)('%s', (_name, snapshot, want) => {
    expect(expected(evaluateRunFence(snapshot))).toBe(want);
  });
});

describe('the reclaim is gated on the BullMQ it was checked against', () => {
  it('is offered under that version only', () => {
    expect(reclaimLockMsFor(5_000, RUN_FENCE_BULLMQ_VERSION)).toBe(5_000);
    expect(reclaimLockMsFor(5_000, '6.7.1')).toBeUndefined();
    expect(reclaimLockMsFor(5_000, '7.0.0')).toBeUndefined();
  });
  it('is open here: the installed BullMQ is that version', () => {
    expect(installedBullmqVersion).toBe(RUN_FENCE_BULLMQ_VERSION);
    expect(reclaimLockMsFor(5_000)).toBe(5_000);
  });
});

/** WRITE_LUA carries out the same table: each row set up in real Redis, the script's answer compared. */
describe('the card write script agrees with evaluateRunFence (real Redis)', () => {
  let server: TestRedis;
  let redis: Redis;
  let store: CardStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    store = new CardStore({ redis, now: Date.now });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const moveTo = (to: CardState): CardMove =>
    to === 'blocked'
      ? { to, attempt: 1, blockedReason: 'needs-human', message: 'asks for help', retryAt: Date.now() + 60_000 }
      : to === 'failed'
        ? { to, attempt: 1, failedReason: 'command-failed', message: 'exit 3' }
        : to === 'running'
          ? { to, attempt: 1, sandboxId: 'sb', slot: 's0' }
          : { to: 'done', attempt: 1, result: { ok: true } };

  /** Builds the row's state: the card, its run, BullMQ's lock and active list. */
  async function arrange(s: RunFenceSnapshot): Promise<{ card: Card; token: string }> {
    const card: Card = { id: `c-${randomBytes(4).toString('hex')}`, lane: `l-${randomBytes(3).toString('hex')}`, title: 'fenced', priority: 0 };
    const token = 'this-run-token';
    const lockKey = keys.jobLock(card.lane, card.id);
    await store.create(card);
    // The card's state and whose run it records: a run of its own moved it there.
    const by = async (owner: string, ...to: CardState[]) => {
      await redis.set(lockKey, owner);
      for (const t of to) expect((await store.transition(card, moveTo(t), { kind: 'run', token: owner })).ok).toBe(true);
    };
    if (s.state === 'running') await by(s.cardRun === 'this-run' ? token : 'another-run-token', 'running');
    if (s.state === 'done') await by('ender-token', 'running', 'done');
    await redis.del(lockKey);
    if (s.lock !== 'none') await redis.set(lockKey, s.lock === 'this-run' ? token : 'another-run-token', 'PX', LOCK_MS);
    if (s.jobActive) await redis.lpush(keys.jobActive(card.lane), card.id);
    await redis.sadd(keys.jobStalled(card.lane), card.id);
    if (s.cancelRequested) expect(await store.requestCancel(card.id)).toBe(s.state);
    return { card, token };
  }

  it.each(ROWS)('%s', async (_name, s, want) => {
    const { card, token } = await arrange(s);
    expect((await store.get(card.id))!.state).toBe(s.state);
    const moved = await store.transition(card, moveTo(s.to), { kind: 'run', token, ...(s.mayReclaim ? { reclaimLockMs: LOCK_MS } : {}) });
    const got = moved.ok ? (moved.reclaimed ? 'write+reclaim' : 'write') : moved.refusal;
    expect(got).toBe(want);
    if (want === 'write+reclaim') {
      expect(await redis.get(keys.jobLock(card.lane, card.id))).toBe(token);
      expect(await redis.pttl(keys.jobLock(card.lane, card.id))).toBeGreaterThan(0);
      expect(await redis.sismember(keys.jobStalled(card.lane), card.id)).toBe(0);
    }
    if (want === 'stale') {
      expect((await store.get(card.id))!.state).toBe(s.state);
      expect(await redis.sismember(keys.jobStalled(card.lane), card.id)).toBe(1);
    }
  });

  /** A run's move into running renews its lock in the same step (its first lease renewal), as BullMQ's extendLock writes it. */
  describe('the move to running renews the run’s lock', () => {
    /** A queued card whose job's lock this run holds with `ttlMs` left, and which BullMQ's stalled check has marked. */
    async function held(ttlMs: number): Promise<{ card: Card; lockKey: string }> {
      const card: Card = { id: `c-${randomBytes(4).toString('hex')}`, lane: `l-${randomBytes(3).toString('hex')}`, title: 'renewed', priority: 0 };
      await store.create(card);
      const lockKey = keys.jobLock(card.lane, card.id);
      await redis.set(lockKey, 'run-token', 'PX', ttlMs);
      await redis.sadd(keys.jobStalled(card.lane), card.id);
      return { card, lockKey };
    }
    const running: CardMove = { to: 'running', attempt: 1, sandboxId: 'sb', slot: 's0' };

    it('with renewLockMs: the lock again for that long, and off the stalled check’s list', async () => {
      const { card, lockKey } = await held(1_000);
      expect((await store.transition(card, running, { kind: 'run', token: 'run-token', renewLockMs: LOCK_MS })).ok).toBe(true);
      expect(await redis.get(lockKey)).toBe('run-token');
      expect(await redis.pttl(lockKey)).toBeGreaterThan(LOCK_MS - 1_000);
      expect(await redis.sismember(keys.jobStalled(card.lane), card.id)).toBe(0);
    });

    it('without it: the lock and the stalled mark are left as they were', async () => {
      const { card, lockKey } = await held(1_000);
      expect((await store.transition(card, running, { kind: 'run', token: 'run-token' })).ok).toBe(true);
      expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(1_000);
      expect(await redis.sismember(keys.jobStalled(card.lane), card.id)).toBe(1);
    });

    it('another run’s lock is never renewed: the move is stale and writes nothing', async () => {
      const { card, lockKey } = await held(1_000);
      const moved = await store.transition(card, running, { kind: 'run', token: 'other-token', renewLockMs: LOCK_MS });
      expect(moved.ok ? 'ok' : moved.refusal).toBe('stale');
      expect(await redis.get(lockKey)).toBe('run-token');
      expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(1_000);
      expect((await store.get(card.id))!.state).toBe('queued');
    });

    it('a move out of running ignores it', async () => {
      const { card, lockKey } = await held(1_000);
      expect((await store.transition(card, running, { kind: 'run', token: 'run-token' })).ok).toBe(true);
      expect((await store.transition(card, { to: 'done', attempt: 1, result: { ok: true } }, { kind: 'run', token: 'run-token', renewLockMs: LOCK_MS })).ok).toBe(true);
      expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(1_000);
    });
  });
});
