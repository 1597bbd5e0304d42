import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LanesClient } from '@lanes/client';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * Retry on a whole stack with real local sandboxes: an agent that fails (or hangs until cancelled)
 * on a card's first run and succeeds on its second. The retried card ends done with both runs in
 * its history, each run's own attempt count, and a fresh BullMQ job under the same id.
 */
describe('retry of a failed or cancelled card on a real stack', () => {
  let redis: TestRedis;
  let t: TestStack;
  let client: LanesClient;
  const dir = mkdtempSync(join(tmpdir(), 'lanes-retry-'));
  const agentFile = join(dir, 'agent.mjs');
  /** Each run appends its card id here as it starts. */
  const runsFile = join(dir, 'runs');
  const runsOf = (id: string) =>
    readFileSync(runsFile, 'utf8')
      .split('\n')
      .filter((line) => line === id).length;

  beforeAll(async () => {
    writeFileSync(runsFile, '');
    writeFileSync(
      agentFile,
      `import { appendFileSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
const id = process.env.LANES_CARD_ID;
const card = JSON.parse(readFileSync(process.env.LANES_CARD_FILE, 'utf8'));
const runs = readFileSync(${JSON.stringify(runsFile)}, 'utf8').split('\\n').filter((line) => line === id).length + 1;
appendFileSync(${JSON.stringify(runsFile)}, id + '\\n');
if (runs === 1 && card.metadata.firstRun === 'fail') {
  console.log('run 1: failing on purpose');
  process.exit(3);
}
if (runs === 1 && card.metadata.firstRun === 'hang') {
  console.log('run 1: working until cancelled');
  setTimeout(() => {}, 120000);
} else {
  console.log('run ' + runs + ': done');
  writeFileSync(join(process.env.LANES_OUTPUT_DIR, 'result.json'), JSON.stringify({ run: runs }));
}
`,
    );
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'retry', slots: 1, attempts: 1, agent: [process.execPath, agentFile], commandTimeoutMs: 60_000, killGraceMs: 200 }]);
    client = new LanesClient({ url: t.stack.url! });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('a failed card retried ends done, with both runs in its history', async () => {
    await client.enqueue({ id: 'retry-fail', lane: 'retry', title: 'flaky', metadata: { firstRun: 'fail' } });
    const failed = await t.api.waitCard('retry-fail', 'failed', (c) => c.state === 'failed');
    expect(failed).toMatchObject({ attempts: 1, failedReason: 'command-failed' });
    const queue = t.stack.api!.queues.queue('retry')!;
    expect(await (await queue.getJob('retry-fail'))!.getState()).toBe('failed');

    expect(await client.retry('retry-fail', 'the flake is fixed')).toEqual({ id: 'retry-fail', state: 'queued' });
    const done = await t.api.waitCard('retry-fail', 'done', (c) => c.state === 'done');
    expect(done.history.map((h) => [h.state, h.attempt, h.message ?? ''])).toEqual([
      ['queued', 0, 'enqueued'],
      ['running', 1, expect.stringMatching(/^slot /)],
      ['failed', 1, expect.any(String)],
      ['queued', 0, 'retried: the flake is fixed'],
      ['running', 1, expect.stringMatching(/^slot /)],
      ['done', 1, ''],
    ]);
    expect(done).toMatchObject({ attempts: 1, infraRetries: 0, result: { run: 2 } });
    expect(done.failedReason).toBeUndefined();
    expect(runsOf('retry-fail')).toBe(2);
    // The same id, a new job: BullMQ's own view agrees with the card, and both runs' output is in its log.
    const job = (await queue.getJob('retry-fail'))!;
    expect(await job.getState()).toBe('completed');
    expect(job.attemptsMade).toBe(1);
    const logs = (await queue.getJobLogs('retry-fail')).logs.join('\n');
    expect(logs).toContain('run 1: failing on purpose');
    expect(logs).toContain('run 2: done');
    // Retrying a done card is refused.
    await expect(client.retry('retry-fail')).rejects.toMatchObject({ status: 409, code: 'CARD_STATE' });
  });

  it('a card cancelled while running, retried, runs again and ends done; the cancel does not follow it', async () => {
    await client.enqueue({ id: 'retry-cancel', lane: 'retry', title: 'stuck', metadata: { firstRun: 'hang' } });
    await t.api.waitCard('retry-cancel', 'running', (c) => c.state === 'running', 20_000);
    // Cancelled once its agent is at work (a cancel before the agent starts never runs it).
    await waitFor('the first run’s agent to start', () => runsOf('retry-cancel') === 1);
    await client.cancel('retry-cancel');
    await t.api.waitCard('retry-cancel', 'cancelled', (c) => c.state === 'cancelled', 20_000);
    expect(await client.retry('retry-cancel')).toEqual({ id: 'retry-cancel', state: 'queued' });
    const done = await t.api.waitCard('retry-cancel', 'done', (c) => c.state === 'done', 20_000);
    expect(done.history.map((h) => h.state)).toEqual(['queued', 'running', 'cancelled', 'queued', 'running', 'done']);
    expect(done.result).toEqual({ run: 2 });
    expect(runsOf('retry-cancel')).toBe(2);
    // Listed as done, newest first.
    const page = await client.list({ lane: 'retry', state: 'done', limit: 1 });
    expect(page.cards.map((c) => c.id)).toEqual(['retry-cancel']);
  });
});
