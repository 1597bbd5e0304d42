import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** Redis dies (kill -9) and comes back from its append-only file while a card runs. */
describe('chaos: Redis restart mid-card', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    t = await startTestStack(redis.url, [{ name: 'rr', slots: 1, agent: [process.execPath, DEMO_AGENT] }]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('loses no card and completes none twice', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'rr-1', lane: 'rr', title: 'survives redis', metadata: { sleepMs: 1_500 } });
    await t.api.waitCard('rr-1', 'running', (c) => c.state === 'running');
    await redis.kill();
    expect((await t.api.request('GET', '/readyz')).status).toBe(503);
    expect((await t.api.request('GET', '/healthz')).status).toBe(200);
    // The board hears at once that it must retry; nothing hangs waiting for Redis.
    const refused = await t.api.request<{ error: { code: string } }>('POST', '/v1/cards', { id: 'rr-down', lane: 'rr', title: 'while redis is down' });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('REDIS_UNAVAILABLE');
    await redis.start();
    await waitFor('readyz after restart', async () => (await t.api.request('GET', '/readyz')).status === 200);
    const done = await t.api.waitCard('rr-1', 'done after the restart', (c) => c.state === 'done', 30_000);
    expect(done.history.filter((h) => h.state === 'done')).toHaveLength(1);
    await t.api.request('POST', '/v1/cards', { id: 'rr-2', lane: 'rr', title: 'after the restart' });
    await t.api.waitCard('rr-2', 'done', (c) => c.state === 'done', 30_000);
  }, 60_000);
});
