import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLanesConfig, type Card } from '@lanes/contracts';
import { CardStore, LaneQueues, asRedisFullError, createRedis, keys, parseInfoMemory } from '@lanes/queue';
import { startRedis, testLog, waitFor, type TestRedis } from '../../../test/harness/index.js';
import { createApiServer, type ApiServer } from '../src/index.js';

const FILLER_VALUE_BYTES = 64 * 1024;
/** Room left above what the test Redis holds when the filling starts: a few dozen filler values. */
const HEADROOM_BYTES = 4 * 1024 * 1024;
/** How far under its use Redis's maxmemory is set once full: more than a client's buffers move by. */
const TIGHTEN_BYTES = 256 * 1024;
const READY_WINDOW_MS = 2_000;

/**
 * A test Redis at its maxmemory under noeviction: what the API answers, what /readyz says, that
 * nothing of a refused enqueue is written, and that all of it recovers once memory is freed.
 */
describe('Redis full (real redis-server at its maxmemory)', () => {
  let server: TestRedis;
  let redis: Redis;
  let admin: Redis;
  let api: ApiServer;
  const lanes = parseLanesConfig({ lanes: [{ name: 'full', agent: ['true'] }] }).lanes;
  let fillers = 0;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    admin = createRedis(server.url);
    api = await createApiServer({ redis, lanes, log: testLog(), redisFullReadyWindowMs: READY_WINDOW_MS });
  });
  afterAll(async () => {
    await api?.close();
    redis?.disconnect();
    admin?.disconnect();
    await server?.stop();
  });

  const usedMemory = async () => parseInfoMemory(await admin.info('memory')).usedMemoryBytes;
  /**
   * Writes filler values until Redis refuses even a tiny one for want of memory: maxmemory reached.
   * Values shrink after each refusal (a large value's own buffer is what tips it over), down to 16 B.
   */
  const fill = async () => {
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', String((await usedMemory()) + HEADROOM_BYTES));
    for (let size = FILLER_VALUE_BYTES; size >= 16; size /= 4) {
      const value = 'x'.repeat(size);
      for (;;) {
        const refused = await admin.set(`filler:${fillers}`, value).then(
          () => undefined,
          (err: unknown) => err,
        );
        if (refused) {
          expect(asRedisFullError(refused)).toBeDefined();
          break;
        }
        fillers++;
        if (fillers > 100_000) throw new Error('Redis never refused a write: is maxmemory set?');
      }
    }
  };
  const free = async () => {
    for (let i = 0; i < fillers; i += 1_000) await admin.del(...Array.from({ length: Math.min(1_000, fillers - i) }, (_, j) => `filler:${i + j}`));
    fillers = 0;
    await admin.config('SET', 'maxmemory', '0');
  };
  /** Every key whose name carries the card id (record, history, job, logs, …). */
  const keysNaming = async (id: string) => admin.keys(`*${id}*`);
  const post = (body: unknown) => api.app.inject({ method: 'POST', url: '/v1/cards', payload: body as object });
  const readyz = () => api.app.inject({ method: 'GET', url: '/readyz' });
  const card = (id: string): Card => ({ id, lane: 'full', title: 't', priority: 0 });

  it('/readyz is 503 REDIS_FULL while INFO memory shows Redis over its maxmemory (noeviction), before any write was refused', async () => {
    expect((await readyz()).statusCode).toBe(200);
    await admin.config('SET', 'maxmemory-policy', 'noeviction');
    await admin.config('SET', 'maxmemory', '1');
    try {
      const res = await readyz();
      expect(res.statusCode).toBe(503);
      expect(res.json()).toEqual({ error: { code: 'REDIS_FULL', message: expect.stringMatching(/used_memory \d+ B is over maxmemory 1 B/) } });
    } finally {
      await admin.config('SET', 'maxmemory', '0');
    }
    expect((await readyz()).statusCode).toBe(200);
  });

  it('answers 503 REDIS_FULL (never 500), /readyz is 503, nothing is half-written, and all recovers once memory is freed', async () => {
    expect((await post({ id: 'before', lane: 'full', title: 't' })).statusCode).toBe(202);
    expect((await readyz()).statusCode).toBe(200);
    const eventsBefore = await admin.xlen(keys.events());

    await fill();
    // Then a little under what it uses: a client's buffer freed between the fill's last refusal and
    // the post (the suite's load moves them) must not leave room for the post's first write.
    await admin.config('SET', 'maxmemory', String((await usedMemory()) - TIGHTEN_BYTES));
    const one = await post({ id: 'oom-1', lane: 'full', title: 't' });
    expect(one.statusCode).toBe(503);
    expect(one.json()).toEqual({ error: { code: 'REDIS_FULL', message: expect.stringMatching(/redis is full/) } });
    // The refusal a request met takes the API out of rotation (INFO may show just under: the refused value's buffer is freed).
    const notReady = await readyz();
    expect(notReady.statusCode).toBe(503);
    expect(notReady.json()).toMatchObject({ error: { code: 'REDIS_FULL', message: expect.stringMatching(/OOM/) } });
    const bulk = await post({ cards: [card('oom-2'), { ...card('oom-3'), priority: 5 }, card('oom-4')] });
    expect(bulk.statusCode).toBe(503);
    expect(bulk.json()).toMatchObject({ error: { code: 'REDIS_FULL' } });
    // A cancel of a queued card still goes through, whole: its first writes delete (the job, the run
    // token), which Redis allows at maxmemory, and a script that has written may finish.
    const cancel = await api.app.inject({ method: 'POST', url: '/v1/cards/before/cancel', headers: { 'content-type': 'application/json' } });
    expect(cancel.statusCode).toBe(202);

    // The MULTI path (lanes not writing BullMQ's layout itself): the record script and BullMQ's adds are refused together.
    const store = new CardStore({ redis, now: Date.now });
    const multiQueues = new LaneQueues({ redis, store, lanes, writeJobs: false });
    try {
      const many = await multiQueues.enqueueMany([card('oom-5'), card('oom-6')]).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(asRedisFullError(many)).toBeDefined();
      const single = await multiQueues.enqueueMany([card('oom-7')]).then(
        () => undefined,
        (err: unknown) => err,
      );
      expect(asRedisFullError(single)).toBeDefined();
    } finally {
      await multiQueues.close();
    }

    for (const id of ['oom-1', 'oom-2', 'oom-3', 'oom-4', 'oom-5', 'oom-6', 'oom-7']) expect(await keysNaming(id)).toEqual([]);
    // The only event written while full is the cancel's.
    expect(await admin.xlen(keys.events())).toBe(eventsBefore + 1);
    expect((await api.app.inject({ method: 'GET', url: '/v1/cards/before' })).json()).toMatchObject({ state: 'cancelled' });
    expect(await admin.lrange('lanes:full:wait', 0, -1)).not.toEqual(expect.arrayContaining(['oom-1']));

    await free();
    await waitFor('/readyz ready once memory is freed', async () => (await readyz()).statusCode === 200, { timeoutMs: 5_000 });
    const again = await post({ cards: [card('oom-1'), card('oom-2')] });
    expect(again.statusCode).toBe(202);
    expect(await admin.exists(keys.card('oom-1'), keys.job('full', 'oom-1'), keys.card('oom-2'), keys.job('full', 'oom-2'))).toBe(4);
  });
});
