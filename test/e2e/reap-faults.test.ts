import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { ProviderUnavailableError } from '@lanes/contracts';
import { EventLog, FleetStore } from '@lanes/queue';
import { createLocalProvider, type LocalSandboxProvider, type SandboxProvider, isAlive } from '@lanes/sandbox';
import { spawnWorker, startRedis, startTestStack, waitFor, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

const HEARTBEAT_INTERVAL_MS = 500;
/** The worker's lock: the supervisor reaps a gone worker's sandboxes only once its silence outlasts it. */
const LOCK_DURATION_MS = 3_000;
const lane = { name: 'reapf', slots: 1, agent: [process.execPath, DEMO_AGENT] };

/** The supervisor's reaping when its provider cannot list, or refuses a terminate: unknown never destroys, a refusal is retried. */
describe('supervisor reaping with a misbehaving provider', () => {
  let redis: TestRedis;
  let dir: string;
  let worker: WorkerProcess | undefined;
  let t: TestStack | undefined;
  let bystander: LocalSandboxProvider | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-reapf-'));
  });
  afterAll(async () => {
    await worker?.crash();
    await t?.stop();
    await bystander?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a gone worker's leftover: not reaped and the worker not forgotten while listing fails; then a refused terminate is retried until it is reaped", async () => {
    const sandboxDir = join(dir, 'sandboxes');
    const faults = { listFails: true, listFailures: 0, terminateRefusals: 1, terminated: [] as string[] };
    let leftoverId: string | undefined;
    const inner = createLocalProvider({ baseDir: sandboxDir });
    const provider: SandboxProvider = new Proxy(inner, {
      get(target, prop) {
        if (prop === 'list') {
          return async (...args: Parameters<SandboxProvider['list']>) => {
            if (faults.listFails) {
              faults.listFailures += 1;
              throw new ProviderUnavailableError(target.name, 'listing refused (test)');
            }
            return target.list(...args);
          };
        }
        if (prop === 'terminateById') {
          return async (id: string) => {
            faults.terminated.push(id);
            if (id === leftoverId && faults.terminateRefusals > 0) {
              faults.terminateRefusals -= 1;
              throw new ProviderUnavailableError(target.name, 'terminate refused (test)');
            }
            return target.terminateById(id);
          };
        }
        const value: unknown = Reflect.get(target, prop, target);
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    worker = spawnWorker({
      dir,
      redisUrl: redis.url,
      sandboxDir,
      lanes: [lane],
      env: { LANES_HEARTBEAT_INTERVAL_MS: String(HEARTBEAT_INTERVAL_MS), LANES_LOCK_DURATION_MS: String(LOCK_DURATION_MS) },
    });
    t = await startTestStack(redis.url, [lane], {
      parts: { api: true, supervisor: true, worker: false },
      heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS,
      lockDurationMs: LOCK_DURATION_MS,
      sandboxDir,
      providers: [provider],
    });
    const owner = await waitFor('the supervisor to judge the worker alive', async () => {
      const s = (await t!.api.lanes())[0]!.slots;
      return s.length === 1 && s[0]!.workerLiveness === 'alive' ? s[0]!.worker : undefined;
    });
    // A sandbox of that worker its death will not end (its record names no owner process), as in e2e/orphans.
    bystander = createLocalProvider({ baseDir: sandboxDir });
    const leftover = await bystander.create({ image: 'local', tags: { lane: 'reapf', slot: 'leftover', worker: owner } });
    leftoverId = leftover.id;
    const recordFile = join(sandboxDir, leftover.id, 'sandbox.json');
    const { ownerPid: _pid, ownerStartTime: _start, ...oldRecord } = JSON.parse(readFileSync(recordFile, 'utf8')) as Record<string, unknown>;
    writeFileSync(recordFile, JSON.stringify(oldRecord));

    await worker.crash();
    const conn = new Redis(redis.url);
    const fleet = new FleetStore(conn);
    await waitFor('the supervisor to judge the worker gone', async () => (await fleet.liveness())[owner]?.liveness === 'gone');
    const failuresWhenGone = faults.listFailures;
    await waitFor('two more sweeps that could not list', () => faults.listFailures >= failuresWhenGone + 2);
    // Could not list: nothing is known about its sandboxes, so nothing is reaped and its record stays.
    expect(isAlive(leftover.pid!)).toBe(true);
    expect(faults.terminated).toEqual([]);
    try {
      expect(owner in (await fleet.beats())).toBe(true);

      faults.listFails = false;
      const reaped = await waitFor('the leftover to be reaped', async () =>
        (await new EventLog(conn).recent(200)).find((e) => e.type === 'sandbox.reaped' && e.sandboxId === leftover.id),
      );
      expect(reaped.data?.owner).toBe(owner);
      // The first terminate was refused; the next sweep tried again.
      expect(faults.terminated.filter((id) => id === leftover.id)).toHaveLength(2);
      expect(isAlive(leftover.pid!)).toBe(false);
      await waitFor('the dead worker to be forgotten', async () => !(owner in (await fleet.beats())));
    } finally {
      conn.disconnect();
    }
  }, 60_000);
});
