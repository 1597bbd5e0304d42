import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** Each run of a card writes `start <id>` and, once its work is done, `end <id>` to a ledger outside the sandbox. */
const AGENT = `
import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
appendFileSync(process.env.RUN_LEDGER, 'start ' + card.id + '\\n');
setTimeout(() => {
  writeFileSync(join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ id: card.id }));
  appendFileSync(process.env.RUN_LEDGER, 'end ' + card.id + '\\n');
}, Number(card.metadata?.sleepMs ?? 0));
`;

/** Redis dies (kill -9) and comes back from its append-only file while a card runs. */
describe('chaos: Redis restart mid-card', () => {
  let redis: TestRedis;
  let t: TestStack;
  let dir: string;
  let ledger: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-rr-'));
    ledger = join(dir, 'ledger.txt');
    writeFileSync(ledger, '');
    const agentPath = join(dir, 'agent.mjs');
    writeFileSync(agentPath, AGENT);
    redis = await startRedis({ appendonly: true });
    t = await startTestStack(redis.url, [{ name: 'rr', slots: 1, agent: [process.execPath, agentPath], env: { RUN_LEDGER: ledger } }]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const ledgerLines = (line: string) =>
    readFileSync(ledger, 'utf8')
      .split('\n')
      .filter((l) => l === line).length;

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
    await t.api.waitCard('rr-1', 'done after the restart', (c) => c.state === 'done', 30_000);
    // The one slot takes rr-2 only when nothing of rr-1 is left to run, so a duplicate run of rr-1
    // would have to finish (or still sit in the queue) before rr-2 is done.
    await t.api.request('POST', '/v1/cards', { id: 'rr-2', lane: 'rr', title: 'after the restart' });
    await t.api.waitCard('rr-2', 'done', (c) => c.state === 'done', 30_000);
    const lane = await waitFor('the lane to be idle', async () => {
      const status = (await t.api.request<{ counts: Record<string, number> }>('GET', '/v1/lanes/rr')).body;
      const pending = ['waiting', 'active', 'delayed', 'prioritized', 'paused'].reduce((n, k) => n + (status.counts[k] ?? 0), 0);
      return pending === 0 ? status : undefined;
    });
    expect(lane.counts.completed).toBe(2);

    // A run that started finishes later: wait until every run the ledger saw start has ended.
    await waitFor('every started run to end', () => ledgerLines('start rr-1') === ledgerLines('end rr-1') && ledgerLines('start rr-2') === ledgerLines('end rr-2'));

    const rr1 = (await t.api.card('rr-1'))!;
    expect(rr1.state).toBe('done');
    expect(rr1.history.filter((h) => h.state === 'done')).toHaveLength(1);
    // The outage is far shorter than the 30 s job lock, so the run keeps its card: one run, one finish.
    expect([ledgerLines('start rr-1'), ledgerLines('end rr-1')]).toEqual([1, 1]);
    expect([ledgerLines('start rr-2'), ledgerLines('end rr-2')]).toEqual([1, 1]);
  }, 60_000);
});
