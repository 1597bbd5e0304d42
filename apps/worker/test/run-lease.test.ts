import { randomBytes } from 'node:crypto';
import { Queue, Worker, type Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_PREFIX, createRedis, keys } from '@lanes/queue';
import { startRedis, testLog, waitFor, type TestRedis } from '../../../test/harness/index.js';
import { RunLease, type FenceDecision } from '../src/run-lease.js';

/** At least 5 s: the fence-before-expiry bound below is the lock itself, and no test bound is under 5 s. */
const LOCK_DURATION_MS = 5_000;
const KILL_GRACE_MS = 100;

/**
 * The lease shell against real Redis and a real BullMQ job taken by hand (`getNextJob`), so BullMQ's
 * own lock extender is not running: whatever keeps the lock alive here is the lease.
 */
describe('RunLease on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let queue: Queue;
  let worker: Worker;
  /** Every connection opened here: BullMQ leaves a connection it was given open, so they are closed here. */
  const connections: Redis[] = [];
  const lane = `lease-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    server = await startRedis({ appendonly: true });
    // One test kills Redis: every connection expects errors while it is away.
    const quiet = () => {
      const connection = createRedis(server.url).on('error', () => undefined);
      connections.push(connection);
      return connection;
    };
    redis = quiet();
    queue = new Queue(lane, { connection: quiet(), prefix: QUEUE_PREFIX });
    worker = new Worker(lane, null, { connection: quiet(), prefix: QUEUE_PREFIX, autorun: false, lockDuration: LOCK_DURATION_MS });
    queue.on('error', () => undefined);
    worker.on('error', () => undefined);
  });
  afterAll(async () => {
    await worker?.close(true);
    await queue?.close();
    for (const connection of connections) connection.disconnect();
    await server?.stop();
  });

  async function take(id: string): Promise<{ job: Job; token: string; lease: RunLease; fences: FenceDecision[] }> {
    await queue.add(lane, {}, { jobId: id });
    const token = `tok-${id}`;
    const job = (await worker.getNextJob(token))!;
    expect(job.id).toBe(id);
    const fences: FenceDecision[] = [];
    const lease = new RunLease({
      job,
      token,
      lockDurationMs: LOCK_DURATION_MS,
      killGraceMs: KILL_GRACE_MS,
      monotonicNow: () => performance.now(),
      onFence: (d) => fences.push(d),
      log: testLog(),
    });
    return { job, token, lease, fences };
  }

  it('keeps the lock alive well past its duration, then fences at once when an extension is refused', async () => {
    const { token, lease, fences } = await take('a');
    try {
      expect(await lease.confirm()).toBe(true);
      const startedAt = performance.now();
      await waitFor('two lock durations to pass', () => performance.now() - startedAt > 2 * LOCK_DURATION_MS);
      expect(await redis.get(keys.jobLock(lane, 'a'))).toBe(token);
      expect(fences).toEqual([]);

      // The job is no longer active under this token: the next renewal answers 0.
      await redis.del(keys.jobLock(lane, 'a'));
      await waitFor('the fence', () => fences.length === 1);
      expect(fences[0]!.cause).toBe('extend-refused');
      expect(lease.fenceDecision()).toEqual(fences[0]);
    } finally {
      lease.stop();
    }
  });

  it('start() sends no renewal: the first is confirm(), or a command that renewed the lock itself (renewedBy)', async () => {
    const { token, lease, fences } = await take('d');
    const lockKey = keys.jobLock(lane, 'd');
    try {
      await redis.pexpire(lockKey, 2_000);
      lease.start();
      // A renewal would be out at once; give it the time a round trip takes, many times over.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(2_000);
      let settled: boolean | undefined;
      void lease.settled().then((v) => (settled = v));
      // The move to running renewed it (the card script's SET … PX), sent before its answer came.
      const sentAtMs = performance.now();
      await redis.set(lockKey, token, 'PX', LOCK_DURATION_MS);
      lease.renewedBy(sentAtMs);
      expect(await lease.settled()).toBe(true);
      expect(settled).toBe(true);
      expect(fences).toEqual([]);
      // confirm() after a confirmed renewal sends nothing more.
      await redis.pexpire(lockKey, 1_500);
      expect(await lease.confirm()).toBe(true);
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await redis.pttl(lockKey)).toBeLessThanOrEqual(1_500);
    } finally {
      lease.stop();
    }
  });

  it('BullMQ reporting the lock lost fences at once', async () => {
    const { lease, fences } = await take('b');
    try {
      expect(await lease.confirm()).toBe(true);
      lease.lost('lock-renewal-failed');
      expect(fences.map((f) => f.cause)).toEqual(['lock-renewal-failed']);
    } finally {
      lease.stop();
    }
  });

  it('Redis gone: no reply ever comes, and the lease fences before the lock could have expired', async () => {
    const { lease, fences } = await take('c');
    try {
      expect(await lease.confirm()).toBe(true);
      await server.kill();
      const downAt = performance.now();
      await waitFor('the fence while Redis is down', () => fences.length === 1, { timeoutMs: 3 * LOCK_DURATION_MS });
      expect(fences[0]!.cause).toBe('renewal-overdue');
      // Every confirmed renewal was sent before Redis went down, so its lock lives past downAt + lock.
      expect(performance.now() - downAt).toBeLessThan(LOCK_DURATION_MS);
    } finally {
      lease.stop();
      await server.start();
    }
  });
});
