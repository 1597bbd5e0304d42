import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createRedis, keys } from '@lanes/queue';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** Short, so the outage outlasts it quickly; the kill grace is short so the fence margin fits inside. */
/** At least 5 s: the fence-before-expiry bound below is the lock itself, and no test bound is under 5 s. */
const LOCK_DURATION_MS = 5_000;
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
  const stacks: TestStack[] = [];

  beforeAll(async () => {
    redis = await startRedis({ appendonly: true });
    dir = mkdtempSync(join(tmpdir(), 'lanes-fence-'));
  });
  afterEach(async () => {
    for (const s of stacks.splice(0).reverse()) await s.stop();
  });
  afterAll(async () => {
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** A lane of its own with its own agent file and ledger; two workers on it, the first with the API. */
  async function fenceLane(name: string) {
    const agentPath = join(dir, `${name}-agent.mjs`);
    const ledgerPath = join(dir, `${name}-ledger.txt`);
    writeFileSync(agentPath, AGENT);
    const lane = { name, slots: 1, agent: [process.execPath, agentPath], killGraceMs: 100, env: { FENCE_LEDGER: ledgerPath } };
    const common = { sandboxDir: join(dir, 'sandboxes'), lockDurationMs: LOCK_DURATION_MS, heartbeatIntervalMs: 500 };
    // No supervisor: what is under test is the workers' own fencing, not reaping.
    const a = await startTestStack(redis.url, [lane], { ...common, parts: { api: true, worker: true, supervisor: false } });
    stacks.push(a);
    return {
      a,
      agents: () => agentPids(agentPath),
      ledger: () => readFileSync(ledgerPath, 'utf8').trim().split('\n'),
      /** A second worker, so another worker can take the card over. */
      secondWorker: async () => {
        stacks.push(await startTestStack(redis.url, [lane], { ...common, parts: { api: false, worker: true, supervisor: false } }));
      },
    };
  }

  /** The card ends once, by the second run, and its job completed rather than failed. */
  async function expectDoneOnceBySecondRun(a: TestStack, id: string, lane: string, ledger: () => string[]) {
    const done = await a.api.waitCard(id, 'done by a later run', (c) => c.state === 'done', 30_000);
    expect(done.history.filter((h) => ['done', 'failed', 'cancelled'].includes(h.state))).toHaveLength(1);
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'running', 'done']);
    // The first run never ended: it was killed, and nothing it could have said was recorded.
    expect(ledger()).toEqual(['start 1', 'start 2', 'end 2']);
    expect(done.result).toEqual({ run: 2 });
    const job = await a.stack.api!.queues.job(id, lane);
    expect(await job?.getState()).toBe('completed');
    // It stalled (its lock was gone), and the stalled check handed it on rather than failing it.
    expect(job?.stalledCounter).toBeGreaterThanOrEqual(1);
  }

  it('Redis away longer than the lock: the agent is killed before the lock can expire, the result discarded, the card done once and not failed by the stalled check', async () => {
    const { a, agents, ledger, secondWorker } = await fenceLane('fence');
    await a.api.request('POST', '/v1/cards', { id: 'fence-1', lane: 'fence', title: 'outlives its lock' });
    await waitFor('the first run to start', () => agents().length === 1 && ledger().length === 1);
    expect((await a.api.card('fence-1'))!.state).toBe('running');
    await secondWorker();

    await redis.kill();
    const downAtMs = performance.now();
    await waitFor('the fence to kill the agent while Redis is down', () => agents().length === 0, { timeoutMs: LOCK_DURATION_MS + 5_000 });
    // The safety property itself: dead before the lock could have expired, so no second run can overlap it.
    expect(performance.now() - downAtMs).toBeLessThan(LOCK_DURATION_MS);
    await waitFor('an outage longer than the lock', () => performance.now() - downAtMs > LOCK_DURATION_MS + OUTAGE_BEYOND_LOCK_MS);
    await redis.start();

    await expectDoneOnceBySecondRun(a, 'fence-1', 'fence', ledger);
  }, 90_000);

  it('the job lock taken away under a live run: its next renewal is refused, the agent killed, the card finished once by another run', async () => {
    const { a, agents, ledger, secondWorker } = await fenceLane('fence-lock');
    await a.api.request('POST', '/v1/cards', { id: 'fence-2', lane: 'fence-lock', title: 'loses its lock' });
    await waitFor('the first run to start', () => agents().length === 1 && ledger().length === 1);
    await secondWorker();
    const conn = createRedis(redis.url);
    try {
      // As if the lock had expired or been handed on: the job is no longer active under the run's token.
      expect(await conn.del(keys.jobLock('fence-lock', 'fence-2'))).toBe(1);
    } finally {
      conn.disconnect();
    }
    await waitFor('the fence to kill the agent', () => agents().length === 0, { timeoutMs: LOCK_DURATION_MS + 5_000 });
    await expectDoneOnceBySecondRun(a, 'fence-2', 'fence-lock', ledger);
  }, 90_000);
});
