import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { EventLog, FleetStore } from '@lanes/queue';
import { spawnWorker, startRedis, startTestStack, waitFor, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

const HEARTBEAT_INTERVAL_MS = 500;

/** Alive and not a zombie: an orphan's zombie waits for whatever init reaps it, which is not ours to time. */
function alive(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] !== 'Z';
  } catch {
    return false;
  }
}

describe('orphan reaping', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-orphans-'));
  });
  afterAll(async () => {
    await worker?.crash();
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('terminates by id the sandbox a SIGKILLed worker left behind, within two heartbeat periods of its expiry', async () => {
    const sandboxDir = join(dir, 'sandboxes');
    worker = spawnWorker({
      dir,
      redisUrl: redis.url,
      sandboxDir,
      lanes: [{ name: 'orph', slots: 1, agent: [process.execPath, DEMO_AGENT] }],
      env: { LANES_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS) },
    });
    t = await startTestStack(redis.url, [{ name: 'orph', slots: 1, agent: [process.execPath, DEMO_AGENT] }], {
      parts: { api: true, supervisor: true, worker: false },
      heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS,
      sandboxDir,
    });
    const sandbox = await waitFor('the worker slot sandbox to be live', async () => {
      const slot = (await t!.api.lanes())[0]!.slots[0];
      return slot?.sandbox?.state === 'live' && slot.sandbox.pid ? slot.sandbox : undefined;
    });
    expect(alive(sandbox.pid!)).toBe(true);

    // Still beating: the supervisor must leave a live worker's sandbox alone.
    await t.stack.supervisor!.sweep();
    expect(alive(sandbox.pid!)).toBe(true);

    await worker.crash();
    const killedAt = Date.now();
    await waitFor('the orphan sandbox to be terminated', () => !alive(sandbox.pid!), { timeoutMs: 10_000, intervalMs: 20 });
    const elapsedMs = Date.now() - killedAt;
    // Expiry is 2 heartbeats after the last beat; one sweep (half a beat) and a terminate may follow.
    expect(elapsedMs).toBeLessThan(2 * HEARTBEAT_INTERVAL_MS + HEARTBEAT_INTERVAL_MS / 2 + 1_000);

    const conn = new Redis(redis.url);
    try {
      const reaped = await waitFor('the sandbox.reaped event', async () => {
        const found = (await new EventLog(conn).recent(100)).filter((e) => e.type === 'sandbox.reaped');
        return found.length ? found : undefined;
      });
      expect(reaped.map((e) => e.sandboxId)).toEqual([sandbox.id]);
      expect(reaped[0]!.lane).toBe('orph');
      // With nothing left to reap on its behalf, the dead worker's records go too.
      const owner = String(reaped[0]!.data?.owner);
      const fleet = new FleetStore(conn);
      await waitFor('the dead worker to be forgotten', async () => !(owner in (await fleet.beats())));
      expect((await fleet.slots('orph')).some((s) => s.worker === owner)).toBe(false);
    } finally {
      conn.disconnect();
    }
  }, 30_000);
});
