import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventLog, keys } from '@lanes/queue';
import { type FaultyProvider, createFaultyProvider } from '@lanes/sandbox/testing';
import { createSupervisorApp, type SupervisorApp } from '@lanes/supervisor';
import { startRedis, startTestStack, testLog, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const HEARTBEAT_INTERVAL_MS = 500;
/** The stack's default: two missed beats. */
const HEARTBEAT_TIMEOUT_MS = 2 * HEARTBEAT_INTERVAL_MS;
const LANE = 'gate-race';

/**
 * The supervisor's re-drive sweep must never judge a blocked card on a breaker read older than the
 * block. A worker opens the breaker and only then blocks the card for provider-outage, so a sweep
 * that read the breaker (closed) and then listed the blocked cards re-drove that card into the
 * outage at once. Under CI load a sweep is slow enough for this to happen by itself; here the
 * worker blocks the card right after the sweep's breaker read, every time.
 */
describe('the supervisor re-drive sweep and a breaker that opens mid-sweep', () => {
  let redis: TestRedis;
  let t: TestStack;
  let faulty: FaultyProvider | undefined;
  let conn: Redis;
  let supervisor: SupervisorApp | undefined;
  let dir: string;

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-gate-race-'));
  });
  afterAll(async () => {
    await supervisor?.stop();
    conn?.disconnect();
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a card blocked for provider-outage just after the sweep read the breaker closed stays blocked until the breaker says otherwise', async () => {
    const release = join(dir, 'release');
    t = await startTestStack(
      redis.url,
      [
        {
          name: LANE,
          slots: 1,
          // Waits for the test, then fails bare: the supervisor probes, and the faulty poll makes it an outage.
          agent: ['sh', '-c', 'while [ ! -e "$0" ]; do sleep 0.02; done; exit 1', release],
          breaker: { failureThreshold: 1, openMs: 60_000 },
        },
      ],
      { parts: { api: true, worker: true, supervisor: false }, heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS, wrap: (p) => (faulty = createFaultyProvider(p)) },
    );
    // The supervisor under test reads Redis through this connection; a read of the breaker can be armed
    // to let the worker block the card before the sweep goes on.
    conn = new Redis(redis.url);
    const realGet = conn.get.bind(conn);
    let onBreakerRead: (() => Promise<void>) | undefined;
    conn.get = (async (key: string) => {
      const value = await realGet(key);
      const hook = key === keys.breaker(LANE) ? onBreakerRead : undefined;
      onBreakerRead = undefined;
      await hook?.();
      return value;
    }) as typeof conn.get;
    supervisor = createSupervisorApp({ redis: conn, lanes: t.lanes, log: testLog(), providers: [], heartbeatTimeoutMs: HEARTBEAT_TIMEOUT_MS });
    const sup = supervisor;

    // Swept by hand (never started): the gate must see a live sandbox on a worker judged alive.
    await waitFor('the slot to be live on an alive worker', async () => {
      await sup.sweep();
      const slot = (await t.api.lanes())[0]!.slots[0];
      return slot?.sandbox?.state === 'live' && slot.workerLiveness === 'alive';
    });
    await t.api.request('POST', '/v1/cards', { id: 'race-1', lane: LANE, title: 'blocked mid-sweep' });
    await t.api.waitCard('race-1', 'running', (c) => c.state === 'running');
    faulty!.updatePlan({ pollErrors: true });

    onBreakerRead = async () => {
      writeFileSync(release, '');
      await t.api.waitCard('race-1', 'blocked (provider-outage)', (c) => c.state === 'blocked' && c.blockedReason === 'provider-outage', 20_000);
    };
    await sup.sweep();
    expect(onBreakerRead).toBeUndefined();

    const card = await t.api.card('race-1');
    expect(card).toMatchObject({ state: 'blocked', blockedReason: 'provider-outage' });
    expect((await t.api.lanes())[0]!.breaker.state).toBe('open');
    const events = await new EventLog(conn).recent(200);
    expect(events.filter((e) => e.cardId === 'race-1' && e.type === 'card.redriven')).toEqual([]);
  }, 60_000);
});
