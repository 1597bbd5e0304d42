import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { startTestStack, useRedis, waitFor } from '../harness/index.js';

const agent = [process.execPath, DEMO_AGENT];
/** Stopping takes a second or two once Redis answers; a stop waiting on a connection that never ends would pass this. */
const STOP_AFTER_REDIS_BACK_MS = 15_000;

describe('a worker told to stop while Redis is down', () => {
  const f = useRedis();

  it('finishes stopping once Redis is back: no connection of its is left waiting for an end that never comes', async () => {
    const t = await startTestStack(f.redis.url, [{ name: 'outage-stop', slots: 2, agent }], { heartbeatIntervalMs: 300 });
    await t.api.request('POST', '/v1/cards', { id: 'os-1', lane: 'outage-stop', title: 'before the outage' });
    await t.api.waitCard('os-1', 'done', (c) => c.state === 'done');
    const worker = t.stack.worker!;

    await f.redis.kill();
    await waitFor('the worker to see Redis gone', () => worker.readiness().ready === false, { timeoutMs: 30_000 });
    let stopped = false;
    const stopping = t.stop().then(() => (stopped = true));
    // With Redis refusing, the worker's connections spend nearly all their time parked between attempts.
    await waitFor('the worker to be stopping', () => worker.readiness().reason === 'worker is stopping');
    expect(stopped).toBe(false);

    await f.redis.start();
    await waitFor('the stack to finish stopping', () => stopped, { timeoutMs: STOP_AFTER_REDIS_BACK_MS });
    await stopping;
  }, 90_000);
});
