import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { sandboxMembers } from '@lanes/sandbox';
import { spawnWorker, startRedis, startTestStack, waitFor, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

const LOCK_DURATION_MS = 1_500;
// A short kill grace keeps the fence margin (the whole kill escalation) inside the short lock.
const lane = { name: 'crash', slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 100 };

/** A worker SIGKILLed mid-card: BullMQ's stalled check hands the card to another worker; it completes once. */
describe('chaos: worker kill -9 mid-card', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-chaos-worker-'));
  });
  afterAll(async () => {
    await worker?.crash();
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('recovers the card on another worker and completes it exactly once', async () => {
    const sandboxDir = join(dir, 'sandboxes');
    worker = spawnWorker({ dir, redisUrl: redis.url, sandboxDir, lanes: [lane], env: { LANES_LOCK_DURATION_MS: String(LOCK_DURATION_MS), LANES_HEARTBEAT_INTERVAL_MS: '500' } });
    // API and supervisor only, for now: the card can only run in the child worker.
    t = await startTestStack(redis.url, [lane], { parts: { api: true, supervisor: true, worker: false }, sandboxDir, heartbeatIntervalMs: 500 });
    await t.api.request('POST', '/v1/cards', { id: 'crash-1', lane: 'crash', title: 'outlives its worker', metadata: { sleepMs: 2_000 } });
    const first = await t.api.waitCard('crash-1', 'running in the child worker', (c) => c.state === 'running');
    await worker.crash();
    await t.stop();

    // A fresh worker (same Redis) takes over the stalled card.
    t = await startTestStack(redis.url, [lane], { sandboxDir, lockDurationMs: LOCK_DURATION_MS, heartbeatIntervalMs: 500 });
    const done = await t.api.waitCard('crash-1', 'done on the new worker', (c) => c.state === 'done', 30_000);
    expect(done.history.filter((h) => h.state === 'done')).toHaveLength(1);
    expect(done.history.filter((h) => h.state === 'running').length).toBeGreaterThanOrEqual(2);
    expect(done.sandboxId).not.toBe(first.sandboxId);
    // A crash is not the card's fault: the recovered run is still attempt 1.
    expect(done.history.filter((h) => h.state === 'running').map((h) => h.attempt)).toEqual([1, 1]);
    const job = await t.stack.api!.queues.job('crash-1', 'crash');
    expect(await job?.getState()).toBe('completed');
    // The sandbox the dead worker left behind is reaped by id: no process of it is left.
    await waitFor('the dead worker sandbox to be reaped', () => sandboxMembers(first.sandboxId!).length === 0 && !existsSync(join(sandboxDir, first.sandboxId!)), {
      timeoutMs: 10_000,
    });
  }, 60_000);
});
