import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Card } from '@lanes/contracts';
import { CardStore, EventLog, QUEUE_PREFIX, jobOptions } from '@lanes/queue';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const LANE = 'scale-it';
const TOKEN = 'scale-test-token';

/**
 * The KEDA scale endpoint over a real API on real Redis and BullMQ. Only the API runs, so the
 * cards stay in the states the test puts them in: nothing takes or promotes them.
 */
describe('GET /v1/lanes/:lane/scale (real stack)', () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;
  let queue: Queue;
  let taker: Worker;

  const get = (path: string, token?: string) => fetch(`${t.stack.url}${path}`, token ? { headers: { authorization: `Bearer ${token}` } } : {});
  const scale = async () => (await (await get(`/v1/lanes/${LANE}/scale`, TOKEN)).json()) as { desiredWorkers: number; desiredSlots: number; depth: Record<string, number> };

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    t = await startTestStack(redis.url, [{ name: LANE, slots: 2, minSlots: 1, maxSlots: 8, agent: ['true'] }], {
      tokens: [TOKEN],
      parts: { api: true, worker: false, supervisor: false },
    });
    queue = new Queue(LANE, { connection: conn, prefix: QUEUE_PREFIX });
    taker = new Worker(LANE, null, { connection: conn, prefix: QUEUE_PREFIX, autorun: false });
  });
  afterAll(async () => {
    await taker?.close();
    await queue?.close();
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  const card = (id: string, priority = 0): Card => ({ id, lane: LANE, title: id, priority });
  const add = (c: Card, delay = 0) => queue.add(LANE, c, { ...jobOptions(c, { attempts: 3 }), ...(delay ? { delay } : {}) });

  it('answers 401 without the token', async () => {
    expect((await get(`/v1/lanes/${LANE}/scale`)).status).toBe(401);
  });

  it('answers 404 for an unknown lane', async () => {
    expect((await get('/v1/lanes/no-such-lane/scale', TOKEN)).status).toBe(404);
  });

  it('counts waiting, prioritized, due-delayed, active and re-drive-pending cards, and no others', async () => {
    expect(await scale()).toMatchObject({ desiredWorkers: 1, desiredSlots: 1, depth: { total: 0 } });
    // Taken first: taking a job also promotes due delayed jobs, which would empty the due-delayed state.
    await add(card('active-1'));
    const taken = await taker.getNextJob('scale-test-run');
    expect(taken?.id).toBe('active-1');
    await add(card('wait-1'));
    await add(card('wait-2'));
    await add(card('prio-1', 1));
    await add(card('due-1'), 1);
    await add(card('later-1'), 3_600_000);
    const store = new CardStore({ redis: conn, events: new EventLog(conn), now: Date.now });
    for (const [id, blockedReason] of [
      ['dead-1', 'sandbox-dead'],
      ['human-1', 'needs-human'],
    ] as const) {
      await store.create(card(id));
      await add(card(id), 3_600_000);
      const moved = await store.transition(card(id), { to: 'blocked', attempt: 1, blockedReason, message: 'test', retryAt: Date.now() + 3_600_000 }, { kind: 'board' });
      expect(moved.ok).toBe(true);
    }
    // due-1 is due 1 ms after it was added; the condition is the endpoint seeing it due.
    await waitFor('due-1 counted as due', async () => (await scale()).depth.dueDelayed === 1, { timeoutMs: 5_000 });
    const body = await scale();
    expect(body.depth).toEqual({ waiting: 2, prioritized: 1, dueDelayed: 1, active: 1, redrivePending: 1, heldBack: 0, total: 6 });
    // LLEN wait alone would say 2.
    expect(await conn.llen(`${QUEUE_PREFIX}:${LANE}:wait`)).toBe(2);
    expect(body.desiredSlots).toBe(6);
    expect(body.desiredWorkers).toBe(3);
  });
});
