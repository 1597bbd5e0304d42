import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** The probe server of a worker-only stack (a `lanes worker` container with LANES_HEALTH_PORT). */
describe('worker probes', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'probed', slots: 1, agent: ['true'] }], { parts: { api: false, worker: true, supervisor: false }, healthPort: 0 });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  const get = (path: string, method = 'GET') => fetch(`http://127.0.0.1:${t.stack.healthPort}${path}`, { method });

  it('answers /healthz, /readyz 200 naming when the last heartbeat reached Redis, and nothing else', async () => {
    expect(t.stack.healthPort).toBeGreaterThan(0);
    expect((await get('/healthz')).status).toBe(200);
    const ready = await waitFor('/readyz 200', async () => {
      const res = await get('/readyz');
      return res.status === 200 ? ((await res.json()) as { status: string; reason: string }) : undefined;
    });
    expect(ready.status).toBe('ready');
    expect(ready.reason).toMatch(/^last heartbeat reached Redis \d+ ms ago$/);
    expect((await get('/nope')).status).toBe(404);
    expect((await get('/healthz', 'POST')).status).toBe(405);
  });

  it('answers /readyz 503 once Redis stops taking heartbeats (/healthz stays 200), and 200 again only once a heartbeat reaches it again', async () => {
    await redis.kill();
    const res = await waitFor('/readyz 503', async () => {
      const r = await get('/readyz');
      return r.status === 503 ? ((await r.json()) as { reason: string }) : undefined;
    });
    expect(res.reason).toContain('heartbeat');
    expect((await get('/healthz')).status).toBe(200);
    // Not ready while Redis is away, however long: readiness follows the heartbeats, not the clock.
    await new Promise((r) => setTimeout(r, 1_000));
    expect((await get('/readyz')).status).toBe(503);
    // Redis back: ready again, on a heartbeat that reached the restarted Redis (and the stack can drain cleanly).
    const restartedAt = Date.now();
    await redis.start();
    const again = await waitFor(
      '/readyz 200 again',
      async () => {
        const r = await get('/readyz');
        return r.status === 200 ? ((await r.json()) as { reason: string }) : undefined;
      },
      { timeoutMs: 30_000 },
    );
    const ageMs = Number(/reached Redis (\d+) ms ago/.exec(again.reason)?.[1]);
    expect(ageMs).toBeLessThanOrEqual(Date.now() - restartedAt);
  });
});
