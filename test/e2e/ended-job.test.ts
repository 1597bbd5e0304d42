import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { CardStore, createRedis, keys } from '@lanes/queue';
import { startRedis, startTestStack, testLog, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const lane = { name: 'ended', slots: 1, agent: [process.execPath, DEMO_AGENT] };

/**
 * A card's end trims its job's data to the ended-job stub (the record keeps the card). A run that
 * ended its card and died before BullMQ finished the job leaves that job to the next worker, with
 * the stub for data: the real worker finishes it from the record, runs nothing, and BullMQ's state
 * follows the card's. Written as such a run leaves it (the job waiting again, as the stalled check
 * leaves it), then a real worker process is started.
 */
describe('a job whose card ended before BullMQ finished it', () => {
  let redis: TestRedis;
  let api: TestStack;
  let worker: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis();
    api = await startTestStack(redis.url, [lane], { parts: { api: true, worker: false, supervisor: false } });
  });
  afterAll(async () => {
    await worker?.stop();
    await api?.stop();
    await redis?.stop();
  });

  async function endedByALostRun(id: string, end: 'done' | 'cancelled') {
    await api.api.request('POST', '/v1/cards', { id, lane: lane.name, title: 'ended by a run that died' });
    const conn = createRedis(redis.url);
    const store = new CardStore({ redis: conn, now: Date.now, log: testLog() });
    try {
      const token = `${id}-gone`;
      await conn.set(keys.jobLock(lane.name, id), token);
      const where = { attempt: 1, sandboxId: 'sb-gone' };
      expect((await store.transition({ id, lane: lane.name }, { ...where, to: 'running' }, { kind: 'run', token })).ok).toBe(true);
      const move = end === 'done' ? ({ ...where, to: 'done', result: { pr: 'merged' } } as const) : ({ ...where, to: 'cancelled' } as const);
      expect((await store.transition({ id, lane: lane.name }, move, { kind: 'run', token })).ok).toBe(true);
      await conn.del(keys.jobLock(lane.name, id));
      expect(JSON.parse((await conn.hget(keys.job(lane.name, id), 'data'))!)).toEqual({ ended: end, id });
    } finally {
      conn.disconnect();
    }
  }

  it('is finished as its record says (done: completed with its result; cancelled: failed), with nothing run again', async () => {
    await endedByALostRun('ended-done', 'done');
    await endedByALostRun('ended-cancelled', 'cancelled');
    worker = await startTestStack(redis.url, [lane], { parts: { api: false, worker: true, supervisor: false } });
    const job = (id: string) => api.stack.api!.queues.job(id, lane.name);
    await waitFor('the done card’s job completed', async () => (await (await job('ended-done'))?.getState()) === 'completed', { timeoutMs: 30_000 });
    expect((await job('ended-done'))?.returnvalue).toEqual({ pr: 'merged' });
    await waitFor('the cancelled card’s job failed', async () => (await (await job('ended-cancelled'))?.getState()) === 'failed', { timeoutMs: 30_000 });
    expect((await job('ended-cancelled'))?.failedReason).toBe('card ended-cancelled is already cancelled');
    for (const [id, state] of [
      ['ended-done', 'done'],
      ['ended-cancelled', 'cancelled'],
    ] as const) {
      const card = await api.api.card(id);
      expect(card.state).toBe(state);
      expect(card.history.filter((h) => h.state === 'running')).toHaveLength(1);
    }
  }, 60_000);
});
