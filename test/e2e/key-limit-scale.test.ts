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

  it('asks no slot for ready cards a worker would only park: a lane at zero workers wants one slot for 20 cards of one key, not 20', async () => {
    const depth = async () => (await t.api.request<{ depth: Record<string, number>; desiredSlots: number }>('GET', `/v1/lanes/${LANE}/scale`)).body;
    const before = (await depth()).depth.total!;
    const cards = Array.from({ length: 20 }, (_, i) => ({ id: `burst-a-${i}`, lane: LANE, title: `repo c #${i}`, concurrencyKey: 'acme/c' }));
    expect((await t.api.request('POST', '/v1/cards', { cards })).status).toBe(202);
    // acme/c runs nowhere yet: one of its cards could run; the other 19 would wait on the key.
    const first = await depth();
    expect(first.depth).toMatchObject({ waiting: 20, heldBack: 19, total: before + 1 });
    // Cards of other keys each could run, up to what the lane could use (maxSlots 8).
    const others = Array.from({ length: 10 }, (_, i) => ({ id: `burst-k-${i}`, lane: LANE, title: `repo k${i}`, concurrencyKey: `acme/k${i}` }));
    expect((await t.api.request('POST', '/v1/cards', { cards: others })).status).toBe(202);
    expect((await depth()).desiredSlots).toBe(8);
    // A supersede key whose earlier card runs holds its newer card back, on this lane as on any.
    // Its record and its place as a run holds them (its job is active, so in no ready list).
    const running: Card = { id: 'sup-running', lane: LANE, title: 'PR 5', priority: 0, supersedeKey: 'acme/c#5' };
    const limits = new KeyLimits(conn);
    await new CardStore({ redis: conn, now: Date.now }).create(running);
    await conn.set(keys.jobLock(LANE, running.id), 'run-sup', 'PX', 60_000);
    expect((await limits.admit({ lane: LANE, cardId: running.id, key: 'acme/c#5', gate: 'supersede' }, 'run-sup', 1, Date.now())).decision).toBe('admit');
    expect(await limits.heldBack(LANE, 1, 1_000)).toBe(19);
    expect((await t.api.request('POST', '/v1/cards', { id: 'sup-newer', lane: LANE, title: 'PR 5 again', supersedeKey: 'acme/c#5' })).status).toBe(202);
    expect(await limits.heldBack(LANE, 1, 1_000)).toBe(20);
  });
});
