import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { CardStore, createRedis, keys } from '@lanes/queue';
import { CRASHED_RUNS_BUDGET } from '@lanes/worker';
import { startRedis, startTestStack, testLog, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const lane = { name: 'budget', slots: 1, agent: [process.execPath, DEMO_AGENT] };

/**
 * A card whose runs keep vanishing with their worker ends, and one whose runs were fenced does
 * not. Earlier runs are written as a crashed worker leaves them: the card running under a run
 * token whose lock is gone, and the BullMQ job waiting again (as the stalled check leaves it).
 */
describe('crash budget: takeovers of a card left running', () => {
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

  /** Posts the card and leaves it as `runs` earlier runs left it; `fenced` of them said they fenced themselves. */
  async function leftRunning(id: string, runs: number, fenced: number) {
    await api.api.request('POST', '/v1/cards', { id, lane: 'budget', title: 'keeps losing its worker' });
    const conn = createRedis(redis.url);
    const store = new CardStore({ redis: conn, now: Date.now, log: testLog() });
    try {
      for (let i = 1; i <= runs; i++) {
        const token = `${id}-gone-${i}`;
        await conn.set(keys.jobLock('budget', id), token);
        expect((await store.transition({ id, lane: 'budget' }, { to: 'running', attempt: 1, sandboxId: `sb-gone-${i}` }, { kind: 'run', token })).ok).toBe(true);
        if (i <= fenced) await store.markFenced(id, token);
      }
      await conn.del(keys.jobLock('budget', id));
    } finally {
      conn.disconnect();
    }
  }

  it(`fails the card (infra) once more than ${CRASHED_RUNS_BUDGET} of its runs vanished; runs that fenced themselves cost nothing`, async () => {
    // budget + 1 vanished runs before this one: the next takeover makes budget + 1 suspects.
    await leftRunning('crashy', CRASHED_RUNS_BUDGET + 1, 0);
    // As many earlier runs, all fenced (outages): no budget spent.
    await leftRunning('outaged', CRASHED_RUNS_BUDGET + 1, CRASHED_RUNS_BUDGET + 1);
    worker = await startTestStack(redis.url, [lane], { parts: { api: false, worker: true, supervisor: false } });

    const failed = await api.api.waitCard('crashy', 'failed for its vanished runs', (c) => c.state === 'failed', 30_000);
    expect(failed.failedReason).toBe('infra');
    expect(failed.history.at(-1)?.message).toMatch(/vanished/);
    expect(failed.history.filter((h) => ['done', 'failed', 'cancelled'].includes(h.state))).toHaveLength(1);
    // The record is the truth and moves first; BullMQ's job follows it to failed.
    const jobState = () => api.stack.api!.queues.job('crashy', 'budget').then((job) => job?.getState());
    await waitFor("crashy's job failed", async () => (await jobState()) === 'failed');

    const done = await api.api.waitCard('outaged', 'done despite its fenced runs', (c) => c.state === 'done', 30_000);
    expect(done.history.filter((h) => h.state === 'done')).toHaveLength(1);
  }, 60_000);
});
