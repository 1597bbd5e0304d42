import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema } from '@lanes/contracts';
import { CasStore, EventLog, createRedis, keys } from '@lanes/queue';
import { LaneBreaker } from '../src/lane-breaker.js';
import { startRedis, testLog, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** Short enough that the retry time comes during the test, long enough to see the open state first. */
const OPEN_MS = 400;

describe('LaneBreaker on its own schedule (real Redis)', () => {
  let redis: TestRedis;
  const closers: Array<() => Promise<unknown> | undefined> = [];

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    for (const close of closers.reverse()) await close();
    await redis?.stop();
  });

  const breakerFor = (name: string, onHalfOpen: () => void) => {
    const conn = createRedis(redis.url);
    const events = new EventLog(conn);
    const cas = new CasStore(conn.duplicate());
    const lane = LaneConfigSchema.parse({ name, agent: ['true'], breaker: { failureThreshold: 2, windowMs: 60_000, openMs: OPEN_MS } });
    const breaker = new LaneBreaker({ lane, cas, events, log: testLog(), now: Date.now, onClosed: () => undefined, onHalfOpen });
    closers.push(async () => {
      breaker.close();
      await cas.close();
      await conn.quit();
    });
    return { breaker, conn, events };
  };

  it('an open breaker half-opens at its retry time with no create asking, and its one probe closes it', async () => {
    let halfOpened = 0;
    const { breaker, conn } = breakerFor('sched-a', () => halfOpened++);
    await breaker.failure('probe failed: unavailable');
    const opened = await breaker.failure('probe failed: unavailable');
    expect(opened.snapshot.state).toBe('open');

    // Nobody calls gate(): every slot of the lane is live, so nothing creates.
    await waitFor('the breaker to half-open by itself', () => halfOpened === 1, { timeoutMs: 10_000 });
    const shared = JSON.parse((await conn.get(keys.breaker('sched-a')))!) as { state: string };
    expect(shared.state).toBe('half-open');

    // The probe a live slot runs on half-open: its canary passing is the reset.
    const step = await breaker.gate();
    expect(step.action).toBe('probe');
    expect((await breaker.canaryPassed()).snapshot.state).toBe('closed');
  });

  it('close() disarms the timer of an open breaker', async () => {
    let halfOpened = 0;
    const { breaker, conn } = breakerFor('sched-b', () => halfOpened++);
    await breaker.failure('one');
    await breaker.failure('two');
    breaker.close();
    // Past the retry time the shared snapshot is still open: only a tick or a gate may move it.
    const deadline = Date.now() + OPEN_MS * 3;
    await waitFor('the retry time to pass', () => Date.now() > deadline, { timeoutMs: 10_000 });
    expect(halfOpened).toBe(0);
    expect((JSON.parse((await conn.get(keys.breaker('sched-b')))!) as { state: string }).state).toBe('open');
  });
});
