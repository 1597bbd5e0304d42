import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { keys } from '@lanes/queue';
import { useRedis, waitFor } from '../harness/index.js';

/** Two seconds, as a lane's `retention.terminalCardDays` (a positive number of days; fractions allowed). */
const RETENTION_DAYS = 2 / 86_400;

/**
 * Retention on a whole stack: a done card and every key naming it expire after the lane's
 * retention, a running card is untouched, and the id can be used again once it has expired.
 */
describe('retention of finished cards', () => {
  const f = useRedis();

  it('a done card and all of its keys are gone after the lane’s retention; a running card is untouched; the id runs again afterwards', async () => {
    const t = await f.stack([
      { name: 'ret', agent: [process.execPath, DEMO_AGENT], commandTimeoutMs: 30_000, retention: { terminalCardDays: RETENTION_DAYS } },
      { name: 'ret-slow', agent: ['sleep', '60'], commandTimeoutMs: 120_000, killGraceMs: 100, retention: { terminalCardDays: RETENTION_DAYS } },
    ]);
    const keysNaming = (id: string) => f.conn.keys(`*${id}*`);

    expect((await t.api.request('POST', '/v1/cards', { id: 'slow-1', lane: 'ret-slow', title: 'runs long' })).status).toBe(202);
    await t.api.waitCard('slow-1', 'running', (c) => c.state === 'running');
    expect((await t.api.request('POST', '/v1/cards', { id: 'kept-1', lane: 'ret', title: 'done soon' })).status).toBe(202);
    const done = await t.api.waitCard('kept-1', 'done', (c) => c.state === 'done');
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
    // Its record, history, BullMQ job and output log exist, all with an expiry.
    const owned = await keysNaming('kept-1');
    expect(owned).toEqual(expect.arrayContaining([keys.card('kept-1'), keys.history('kept-1'), keys.job('ret', 'kept-1'), keys.jobLogs('ret', 'kept-1')]));
    for (const key of owned) expect(await f.conn.pttl(key)).toBeGreaterThan(0);

    await waitFor('every key naming kept-1 to expire', async () => (await keysNaming('kept-1')).length === 0, { timeoutMs: 15_000, intervalMs: 100 });
    expect((await t.api.request('GET', '/v1/cards/kept-1')).status).toBe(404);

    // The running card, on a lane with the same retention, is untouched: nothing of it expires.
    const running = await t.api.card('slow-1');
    expect(running.state).toBe('running');
    const slowKeys = await keysNaming('slow-1');
    expect(slowKeys).toEqual(expect.arrayContaining([keys.card('slow-1'), keys.history('slow-1'), keys.job('ret-slow', 'slow-1')]));
    for (const key of slowKeys.filter((k) => k !== keys.jobLock('ret-slow', 'slow-1'))) expect(await f.conn.pttl(key)).toBe(-1);

    // An expired id is a new card: it gets a record and a job, and runs (BullMQ's finished set no longer names it).
    const again = await t.api.request<{ id: string; state: string }>('POST', '/v1/cards', { id: 'kept-1', lane: 'ret', title: 'again' });
    expect(again.status).toBe(202);
    const rerun = await t.api.waitCard('kept-1', 'done again', (c) => c.state === 'done');
    expect(rerun.title).toBe('again');
    expect(rerun.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);

    expect((await t.api.request('POST', '/v1/cards/slow-1/cancel')).status).toBe(202);
    await t.api.waitCard('slow-1', 'cancelled', (c) => c.state === 'cancelled');
  }, 90_000);
});
