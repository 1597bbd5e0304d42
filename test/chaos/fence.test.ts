import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** Short, so the outage outlasts it quickly; the kill grace is short so the fence margin fits inside. */
const LOCK_DURATION_MS = 2_500;
/** Redis stays down this much longer than the lock: every lock it held has expired when it returns. */
const OUTAGE_BEYOND_LOCK_MS = 1_000;

/**
 * The agent keeps its own ledger: one line when a run starts and one when it ends. Its first run
 * works for a minute (so only a fence can end it); later runs finish at once.
 */
const AGENT = `
import { appendFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const ledger = process.env.FENCE_LEDGER;
const runs = existsSync(ledger) ? readFileSync(ledger, 'utf8').split('\\n').filter((l) => l.startsWith('start')).length : 0;
const run = runs + 1;
appendFileSync(ledger, 'start ' + run + '\\n');
setTimeout(() => {
  writeFileSync(join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ run }));
  appendFileSync(ledger, 'end ' + run + '\\n');
}, run === 1 ? 60_000 : 100);
`;

/** Host pids of agent processes: their command line names this suite's agent file. */
function agentPids(agentPath: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').split('\0').includes(agentPath)) pids.push(Number(name));
    } catch {
      // The process ended while we looked.
    }
  }
  return pids;
}

describe('chaos: fencing a run that lost its lock', () => {
  let redis: TestRedis;
  let dir: string;
  let a: TestStack | undefined;
  let b: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    dir = mkdtempSync(join(tmpdir(), 'lanes-fence-'));
  });
  afterAll(async () => {
    await b?.stop();
    await a?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('Redis away longer than the lock: the agent is killed before the lock can expire, the result discarded, the card done once and not failed by the stalled check', async () => {
    const agentPath = join(dir, 'fence-agent.mjs');
    const ledgerPath = join(dir, 'ledger.txt');
    writeFileSync(agentPath, AGENT);
    const lane = { name: 'fence', slots: 1, agent: [process.execPath, agentPath], killGraceMs: 100, env: { FENCE_LEDGER: ledgerPath } };
    const sandboxDir = join(dir, 'sandboxes');
    const common = { sandboxDir, lockDurationMs: LOCK_DURATION_MS, heartbeatIntervalMs: 500 };
    // No supervisor: what is under test is the workers' own fencing, not reaping.
    a = await startTestStack(redis.url, [lane], { ...common, parts: { api: true, worker: true, supervisor: false } });
    const ledger = () => readFileSync(ledgerPath, 'utf8').trim().split('\n');

    await a.api.request('POST', '/v1/cards', { id: 'fence-1', lane: 'fence', title: 'outlives its lock' });
    await waitFor('the first run to start', () => agentPids(agentPath).length === 1 && ledger().length === 1);
    const first = (await a.api.card('fence-1'))!;
    expect(first.state).toBe('running');
    // A second worker, so another worker can take the card over.
    b = await startTestStack(redis.url, [lane], { ...common, parts: { api: false, worker: true, supervisor: false } });

    await redis.kill();
    const downAtMs = performance.now();
    await waitFor('the fence to kill the agent while Redis is down', () => agentPids(agentPath).length === 0, { timeoutMs: LOCK_DURATION_MS + 5_000 });
    // The safety property itself: dead before the lock could have expired, so no second run can overlap it.
    expect(performance.now() - downAtMs).toBeLessThan(LOCK_DURATION_MS);
    await waitFor('an outage longer than the lock', () => performance.now() - downAtMs > LOCK_DURATION_MS + OUTAGE_BEYOND_LOCK_MS);
    await redis.start();

    const done = await a.api.waitCard('fence-1', 'done by a later run', (c) => c.state === 'done', 30_000);
    expect(done.history.filter((h) => ['done', 'failed', 'cancelled'].includes(h.state))).toHaveLength(1);
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'running', 'done']);
    // The first run never ended: it was killed, and nothing it could have said was recorded.
    expect(ledger()).toEqual(['start 1', 'start 2', 'end 2']);
    expect(done.result).toEqual({ run: 2 });
    const job = await a.stack.api!.queues.job('fence-1', 'fence');
    expect(await job?.getState()).toBe('completed');
    // It did stall once (its lock expired during the outage), and the stalled check did not fail it.
    expect(job?.stalledCounter).toBeGreaterThanOrEqual(1);
  }, 90_000);
});
