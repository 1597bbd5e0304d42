import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, main } from '@lanes/cli';
import { startRedis, startTestStack, type TestRedis, type TestStack } from '../harness/index.js';

/** `lanes cards` and `lanes retry` against a real API (alone: cards stay where the test puts them). */
describe('lanes cards and lanes retry', () => {
  let redis: TestRedis;
  let t: TestStack;
  let env: NodeJS.ProcessEnv;

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const code = await main(argv, env, (s) => out.push(s));
    return { code, text: out.join('\n') };
  };

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(
      redis.url,
      [
        { name: 'cli-a', agent: [process.execPath, DEMO_AGENT] },
        { name: 'cli-b', agent: [process.execPath, DEMO_AGENT] },
      ],
      { parts: { api: true, worker: false, supervisor: false } },
    );
    env = { LANES_API_URL: t.stack.url! };
    for (let i = 0; i < 4; i++) await t.api.request('POST', '/v1/cards', { id: `cli-a${i}`, lane: 'cli-a', title: `card a${i}` });
    await t.api.request('POST', '/v1/cards', { id: 'cli-b0', lane: 'cli-b', title: 'card b0' });
    await t.api.request('POST', '/v1/cards/cli-a1/cancel');
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('lists cards as a table, newest update first, filtered by lane and state', async () => {
    const all = await run('cards');
    expect(all.code).toBe(0);
    expect(all.text).toMatch(/^card\s+lane\s+state\s+reason\s+attempts\s+updated\s+title$/m);
    expect(
      all.text
        .split('\n')
        .filter((l) => /^cli-/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['cli-a1', 'cli-b0', 'cli-a3', 'cli-a2', 'cli-a0']);

    const queued = await run('cards', '--lane', 'cli-a', '--state', 'queued');
    expect(
      queued.text
        .split('\n')
        .filter((l) => /^cli-/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['cli-a3', 'cli-a2', 'cli-a0']);
    expect(queued.text).toMatch(/^cli-a3\s+cli-a\s+queued\s+-\s+0\s+\S+Z\s+card a3$/m);
  });

  it('pages with --limit and --cursor, or follows every page with --all', async () => {
    const first = await run('cards', '--lane', 'cli-a', '--limit', '2');
    expect(first.text.split('\n').filter((l) => /^cli-/.test(l))).toHaveLength(2);
    const cursor = /--cursor (\S+)/.exec(first.text)?.[1];
    expect(cursor).toBeDefined();
    const second = await run('cards', '--lane', 'cli-a', '--limit', '2', '--cursor', cursor!);
    expect(
      second.text
        .split('\n')
        .filter((l) => /^cli-/.test(l))
        .map((l) => l.split(/\s+/)[0]),
    ).toEqual(['cli-a2', 'cli-a0']);
    expect(second.text).not.toContain('--cursor');
    const every = await run('cards', '--lane', 'cli-a', '--limit', '1', '--all');
    expect(every.text.split('\n').filter((l) => /^cli-/.test(l))).toHaveLength(4);
  });

  it('retry queues a cancelled card again, with the reason in its history; a refusal exits 1', async () => {
    const retried = await run('retry', 'cli-a1', '--reason', 'try again');
    expect(retried.code).toBe(0);
    expect(retried.text).toMatch(/^cli-a1\s+queued$/m);
    expect((await t.api.card('cli-a1')).history.at(-1)?.message).toBe('retried: try again');
    expect((await run('retry', 'cli-a1')).code).toBe(1);
    expect((await run('retry')).code).toBe(2);
    expect((await run('cards', '--state', 'nope')).code).toBe(1);
  });
});
