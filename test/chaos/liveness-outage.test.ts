import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { parseLanesConfig } from '@lanes/contracts';
import { EventLog, FleetStore, createRedis } from '@lanes/queue';
import { createProviderRegistry, isAlive } from '@lanes/sandbox';
import { createSupervisorApp, type SupervisorApp } from '@lanes/supervisor';
import { spawnWorker, startRedis, startTestStack, testLog, waitFor, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

const HEARTBEAT_INTERVAL_MS = 500;
/** The stack's default: two missed beats. */
const HEARTBEAT_TIMEOUT_MS = 2 * HEARTBEAT_INTERVAL_MS;
/** The fault itself: Redis stays down three heartbeat timeouts, as a managed-Redis failover outlasts the defaults. */
const OUTAGE_MS = 3 * HEARTBEAT_TIMEOUT_MS;
const lane = { name: 'outage', slots: 1, agent: [process.execPath, DEMO_AGENT] };

async function reapedEvents(url: string) {
  const conn = new Redis(url);
  try {
    return (await new EventLog(conn).recent(1_000)).filter((e) => e.type === 'sandbox.reaped');
  } finally {
    conn.disconnect();
  }
}

/** Liveness without clocks: a Redis outage longer than the heartbeat timeout must not make a live worker look dead. */
describe('chaos: Redis down longer than the heartbeat timeout', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    dir = mkdtempSync(join(tmpdir(), 'lanes-outage-'));
  });
  afterAll(async () => {
    await worker?.crash();
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('reaps nothing of a live worker: its sandbox and card run through, 0 false reaps', async () => {
    const sandboxDir = join(dir, 'sandboxes');
    // The worker is its own process with its own connection, as in a deployment.
    worker = spawnWorker({ dir, redisUrl: redis.url, sandboxDir, lanes: [lane], env: { LANES_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS) } });
    t = await startTestStack(redis.url, [lane], { parts: { api: true, supervisor: true, worker: false }, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS, sandboxDir });
    await t.api.request('POST', '/v1/cards', { id: 'outage-1', lane: 'outage', title: 'runs through the outage', metadata: { sleepMs: OUTAGE_MS + 3_000 } });
    const running = await t.api.waitCard('outage-1', 'running', (c) => c.state === 'running' && Boolean(c.sandboxId));
    const slot = await waitFor('the supervisor to judge the worker alive', async () => {
      const s = (await t!.api.lanes())[0]!.slots[0];
      return s?.workerLiveness === 'alive' && s.sandbox?.pid ? s : undefined;
    });
    expect(slot.sandbox!.id).toBe(running.sandboxId);

    await redis.kill();
    // The outage's length is the fault being injected, not a wait for a condition.
    await new Promise((resolve) => setTimeout(resolve, OUTAGE_MS));
    await redis.start();

    // Back: the card finishes in the sandbox it started in, and the worker is judged alive again.
    const done = await t.api.waitCard('outage-1', 'done', (c) => c.state === 'done', 30_000);
    expect(done.sandboxId).toBe(running.sandboxId);
    expect(done.history.filter((h) => h.state === 'done')).toHaveLength(1);
    expect(done.history.some((h) => h.state === 'blocked')).toBe(false);
    await waitFor('the worker to be judged alive after the outage', async () => (await t!.api.lanes())[0]!.slots[0]?.workerLiveness === 'alive');
    // The supervisor has had more than a full timeout of visibility since Redis came back.
    await t.stack.supervisor!.sweep();
    expect(isAlive(slot.sandbox!.pid!)).toBe(true);
    expect(await reapedEvents(redis.url)).toEqual([]);
  }, 60_000);
});

describe('liveness across hosts whose clocks disagree', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;
  let supervisor: SupervisorApp | undefined;
  const conn = { redis: undefined as ReturnType<typeof createRedis> | undefined };

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-skew-'));
  });
  afterAll(async () => {
    await worker?.crash();
    await supervisor?.stop();
    await t?.stop();
    conn.redis?.disconnect();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a supervisor whose clocks (wall, and the monotonic one liveness is judged on) run a minute ahead of the worker's judges it alive and reaps nothing of it", async () => {
    const sandboxDir = join(dir, 'sandboxes');
    worker = spawnWorker({ dir, redisUrl: redis.url, sandboxDir, lanes: [lane], env: { LANES_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS) } });
    t = await startTestStack(redis.url, [lane], { parts: { api: true, supervisor: false, worker: false }, sandboxDir });
    conn.redis = createRedis(redis.url);
    const lanes = parseLanesConfig({ lanes: [lane] }).lanes;
    const registry = await createProviderRegistry({ sandboxDir, env: {}, lanes });
    supervisor = createSupervisorApp({
      redis: conn.redis,
      lanes,
      log: testLog(),
      providers: registry.all(lanes),
      heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS,
      sweepIntervalMs: HEARTBEAT_INTERVAL_MS / 2,
      // Another host, its clocks a minute ahead. The wall clock is only used for event timestamps;
      // liveness runs on the monotonic one, and judges beats by sequence, never by the worker's time.
      now: () => Date.now() + 60_000,
      monotonicNow: () => performance.now() + 60_000,
    });
    await supervisor.start();
    await t.api.request('POST', '/v1/cards', { id: 'skew-1', lane: 'outage', title: 'runs beside a skewed supervisor', metadata: { sleepMs: 3 * HEARTBEAT_TIMEOUT_MS } });
    const running = await t.api.waitCard('skew-1', 'running', (c) => c.state === 'running' && Boolean(c.sandboxId));
    await waitFor('the skewed supervisor to judge the worker alive', async () => (await t!.api.lanes())[0]!.slots[0]?.workerLiveness === 'alive');
    const done = await t.api.waitCard('skew-1', 'done', (c) => c.state === 'done', 30_000);
    expect(done.sandboxId).toBe(running.sandboxId);
    expect(done.history.some((h) => h.state === 'blocked')).toBe(false);
    expect(await reapedEvents(redis.url)).toEqual([]);
  }, 60_000);
});

describe('a worker silent on Redis but still running (cut off, or stalled)', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-silent-'));
  });
  afterAll(async () => {
    if (worker?.child.pid) process.kill(worker.child.pid, 'SIGCONT');
    await worker?.crash();
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('is judged gone, yet its sandboxes are kept: the provider still sees the process; it is alive again once it beats', async () => {
    const sandboxDir = join(dir, 'sandboxes');
    worker = spawnWorker({ dir, redisUrl: redis.url, sandboxDir, lanes: [lane], env: { LANES_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS) } });
    t = await startTestStack(redis.url, [lane], { parts: { api: true, supervisor: true, worker: false }, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS, sandboxDir });
    const slot = await waitFor('the supervisor to judge the worker alive', async () => {
      const s = (await t!.api.lanes())[0]!.slots[0];
      return s?.workerLiveness === 'alive' && s.sandbox?.pid ? s : undefined;
    });
    const conn = new Redis(redis.url);
    try {
      const fleet = new FleetStore(conn);
      // Stopped, the worker beats no more, exactly as if its link to Redis were down.
      process.kill(worker.child.pid!, 'SIGSTOP');
      await waitFor('the supervisor to judge the silent worker gone', async () => (await fleet.liveness())[slot.worker]?.liveness === 'gone');
      await t.stack.supervisor!.sweep();
      expect(isAlive(slot.sandbox!.pid!)).toBe(true);
      expect(await reapedEvents(redis.url)).toEqual([]);
      process.kill(worker.child.pid!, 'SIGCONT');
      await waitFor('the worker to be judged alive again', async () => (await fleet.liveness())[slot.worker]?.liveness === 'alive');
      expect(isAlive(slot.sandbox!.pid!)).toBe(true);
    } finally {
      conn.disconnect();
    }
  }, 60_000);
});
