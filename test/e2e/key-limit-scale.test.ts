import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KEY_LIMIT_WAITING, type Card } from '@lanes/contracts';
import { CardStore, KeyLimits, QUEUE_PREFIX, jobOptions, keys } from '@lanes/queue';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const LANE = 'keyed-scale';

/**
 * The scale endpoint and the lane counts over parked cards, on a real API and Redis with no worker:
 * the cards stay as the test puts them. A parked card whose backstop has come due is still no
 * demand (it waits on its key, not on a slot); a due delayed card of no key is.
 */
describe('parked cards in GET /v1/lanes and the scale endpoint (real stack)', () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;
  let queue: Queue;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    t = await startTestStack(redis.url, [{ name: LANE, slots: 2, minSlots: 1, maxSlots: 8, maxRunningPerKey: 1, agent: ['true'] }], {
      parts: { api: true, worker: false, supervisor: false },
    });
    queue = new Queue(LANE, { connection: conn, prefix: QUEUE_PREFIX });
  });
  afterAll(async () => {
    await queue?.close();
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  it('refuses a bad concurrencyKey with a 400 naming the field', async () => {
    const res = await t.api.request<{ error: { code: string; message: string; issues?: Array<{ path: string }> } }>('POST', '/v1/cards', {
      lane: LANE,
      title: 'bad key',
      concurrencyKey: 'acme:widgets',
    });
    expect(res.status).toBe(400);
    expect(res.text).toContain('concurrencyKey');
  });

  it('counts a parked card as waiting (key limit), never as demand', async () => {
    const store = new CardStore({ redis: conn, now: Date.now });
    const limits = new KeyLimits(conn);
    const card = (id: string, concurrencyKey?: string): Card => ({ id, lane: LANE, title: id, priority: 0, ...(concurrencyKey ? { concurrencyKey } : {}) });
    // One card of acme/a holds the key's place (as a run would: its job's lock held); two more are parked.
    const holder = card('holder', 'acme/a');
    await store.create(holder);
    await conn.set(keys.jobLock(LANE, holder.id), 'run-holder', 'PX', 60_000);
    expect((await limits.admit({ lane: LANE, cardId: holder.id, key: 'acme/a' }, 'run-holder', 1, Date.now())).decision).toBe('admit');
    for (const id of ['parked-1', 'parked-2']) {
      await store.create(card(id, 'acme/a'));
      await conn.set(keys.jobLock(LANE, id), `run-${id}`, 'PX', 60_000);
      expect((await limits.admit({ lane: LANE, cardId: id, key: 'acme/a' }, `run-${id}`, 1, Date.now())).decision).toBe('park');
      await conn.del(keys.jobLock(LANE, id));
      // Its job delayed, and its backstop already due.
      await queue.add(LANE, card(id, 'acme/a'), { ...jobOptions(card(id, 'acme/a'), { attempts: 1 }), delay: 1 });
    }
    await queue.add(LANE, card('plain-due'), { ...jobOptions(card('plain-due'), { attempts: 1 }), delay: 1 });

    const scale = async () => (await t.api.request<{ depth: Record<string, number> }>('GET', `/v1/lanes/${LANE}/scale`)).body;
    // Due 1 ms after it was added; the condition is the endpoint seeing it due.
    await waitFor('the plain card counted as due', async () => (await scale()).depth.dueDelayed === 1, { timeoutMs: 5_000 });
    expect((await scale()).depth).toMatchObject({ dueDelayed: 1, total: 1 });
    const lane = (await t.api.lanes()).find((l) => l.name === LANE)!;
    expect(lane.counts[KEY_LIMIT_WAITING]).toBe(2);
    expect(lane.counts.delayed).toBe(3);
    expect(await t.api.card('parked-1')).toMatchObject({ state: 'queued', stateDetail: KEY_LIMIT_WAITING });
    expect((await t.api.card('holder')).stateDetail).toBeUndefined();
  });
});
