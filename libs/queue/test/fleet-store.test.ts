import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FleetStore, SANDBOX_RECORD_TTL_S, createRedis, keys } from '@lanes/queue';
import { livenessOf } from '@lanes/supervision';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

const uid = (p: string) => `${p}-${randomBytes(4).toString('hex')}`;

describe('FleetStore liveness and sandbox records (real Redis)', () => {
  let server: TestRedis;
  let redis: Redis;
  let fleet: FleetStore;

  beforeAll(async () => {
    server = await startRedis({ appendonly: true });
    redis = createRedis(server.url);
    // The restart test stops the server under this connection: its refused reconnects are expected,
    // and without a listener ioredis prints each as an unhandled error event.
    redis.on('error', () => undefined);
    fleet = new FleetStore(redis);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('beats are sequences per worker; a forgotten worker drops out', async () => {
    const [a, b] = [uid('w'), uid('w')];
    await fleet.beat(a, 1);
    await fleet.beat(b, 1);
    await fleet.beat(a, 2);
    const { beats, redisRunId } = await fleet.readBeats();
    expect(beats[a]).toBe(2);
    expect(beats[b]).toBe(1);
    expect(redisRunId).toMatch(/^[0-9a-f]{40}$/);
    await fleet.forgetWorker(a);
    expect(a in (await fleet.beats())).toBe(false);
  });

  it("a lane's slots read back by worker, then slot, in code-unit order (the same on every host, no collator)", async () => {
    const lane = uid('lane');
    const put = (worker: string, slot: string) => fleet.putSlot(lane, { worker, slot });
    for (const [worker, slot] of [
      ['w-b', 'lane-2'],
      ['w-a', 'lane-b'],
      ['w-B', 'lane-1'],
      ['w-a', 'lane-B'],
      ['w-a', 'lane-10'],
    ] as const)
      await put(worker, slot);
    // A collator sorts case-blind ('w-a' before 'w-B'); code units put capitals first.
    expect((await fleet.slots(lane)).map((s) => `${s.worker}/${s.slot}`)).toEqual(['w-B/lane-1', 'w-a/lane-10', 'w-a/lane-B', 'w-a/lane-b', 'w-b/lane-2']);
  });

  it('a Redis restart shows as a new run id, with the beats kept by the append-only file', async () => {
    const w = uid('w');
    await fleet.beat(w, 7);
    const before = await fleet.readBeats();
    await server.kill();
    await server.start();
    const after = await waitFor('Redis to answer again', () => fleet.readBeats().catch(() => undefined));
    expect(after.beats[w]).toBe(7);
    expect(after.redisRunId).toBeDefined();
    expect(after.redisRunId).not.toBe(before.redisRunId);
  });

  it('verdicts are published as a whole, with a TTL, and read back by worker; garbage is skipped', async () => {
    const [a, b] = [uid('w'), uid('w')];
    await fleet.putLiveness(
      [
        { worker: a, liveness: 'alive', reason: 'beat 3 seen 10 ms ago' },
        { worker: b, liveness: 'gone', reason: 'stuck' },
      ],
      5_000,
    );
    await redis.hset(keys.liveness(), 'junk', '{not json', 'bad', JSON.stringify({ worker: 'bad', liveness: 'maybe', reason: 'x' }));
    expect(await fleet.liveness()).toEqual({
      [a]: { worker: a, liveness: 'alive', reason: 'beat 3 seen 10 ms ago' },
      [b]: { worker: b, liveness: 'gone', reason: 'stuck' },
    });
    const ttlMs = await redis.pttl(keys.liveness());
    expect(ttlMs).toBeGreaterThan(0);
    expect(ttlMs).toBeLessThanOrEqual(5_000);
    // The next sweep replaces them all; none left means nothing published.
    await fleet.putLiveness([{ worker: a, liveness: 'unknown', reason: 'Redis just regained' }], 5_000);
    expect(Object.keys(await fleet.liveness())).toEqual([a]);
    await fleet.putLiveness([], 5_000);
    expect(await fleet.liveness()).toEqual({});
  });

  it('verdicts of a supervisor that stopped publishing expire: none reads as unknown, never gone', async () => {
    const w = uid('w');
    // Long enough to read it back before it expires on a loaded machine.
    await fleet.putLiveness([{ worker: w, liveness: 'gone', reason: 'stuck' }], 500);
    // Read as every reader reads it (the API's lane status, the slot scaler, lane scale): livenessOf.
    expect(livenessOf(await fleet.liveness(), w)).toBe('gone');
    await waitFor('the verdicts to expire', async () => Object.keys(await fleet.liveness()).length === 0);
    expect(livenessOf(await fleet.liveness(), w)).toBe('unknown');
  });

  // Sandbox records: what the worker writes of each sandbox it makes, and GET /v1/sandboxes/:id reads.
  const base = (id: string) => ({ id, provider: 'local', lane: 'l', slot: 's-0', worker: 'w-1' });

  it('a record merges into the one before it and outlives its sandbox by a week', async () => {
    const id = uid('sb');
    await fleet.putSandbox({ ...base(id), state: 'creating', pid: 42, createdAt: '2026-12-03T08:00:00.000Z' });
    await fleet.putSandbox({ ...base(id), state: 'dead', deadAt: '2026-12-03T08:01:00.000Z', observedExitCode: 0, reason: 'exited(0) — “quoted” / slashed' });
    expect(await fleet.sandbox(id)).toEqual({
      ...base(id),
      state: 'dead',
      pid: 42,
      createdAt: '2026-12-03T08:00:00.000Z',
      deadAt: '2026-12-03T08:01:00.000Z',
      observedExitCode: 0,
      reason: 'exited(0) — “quoted” / slashed',
    });
    const ttlS = await redis.ttl(keys.sandbox(id));
    expect(ttlS).toBeGreaterThan(SANDBOX_RECORD_TTL_S - 60);
    expect(ttlS).toBeLessThanOrEqual(SANDBOX_RECORD_TTL_S);
    expect(await fleet.sandboxOwners([id, uid('none')])).toEqual({ [id]: { worker: 'w-1', lane: 'l', slot: 's-0' } });
  });

  it('records sent together (the worker does not wait for one before the next) lose no field', async () => {
    // A death's details and the replacement that follows it, queued on one connection (as they are
    // while Redis is away): a merge that reads before the other's write landed would drop one.
    const id = uid('sb');
    await fleet.putSandbox({ ...base(id), state: 'live', liveAt: '2026-12-03T08:00:00.000Z' });
    await Promise.all([
      fleet.putSandbox({ ...base(id), state: 'dead', deadAt: '2026-12-03T08:01:00.000Z', observedExitCode: 'unknown', reason: 'poll: missing' }),
      fleet.putSandbox({ ...base(id), state: 'dead', replacedBy: 'sb-next' }),
    ]);
    expect(await fleet.sandbox(id)).toMatchObject({
      state: 'dead',
      liveAt: '2026-12-03T08:00:00.000Z',
      deadAt: '2026-12-03T08:01:00.000Z',
      observedExitCode: 'unknown',
      reason: 'poll: missing',
      replacedBy: 'sb-next',
    });
  });

  it('an unreadable record reads as none, and is replaced, not kept', async () => {
    const id = uid('sb');
    await redis.set(keys.sandbox(id), '{"id":"half a record"}');
    expect(await fleet.sandbox(id)).toBeUndefined();
    await redis.set(keys.sandbox(id), '{not json');
    expect(await fleet.sandbox(id)).toBeUndefined();
    await fleet.putSandbox({ ...base(id), state: 'live' });
    expect(await fleet.sandbox(id)).toEqual({ ...base(id), state: 'live' });
  });
});
