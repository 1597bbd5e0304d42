import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, PROJECT_DIR, main, type Stack } from '@lanes/cli';
import { freePort, startApiOnly, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');

describe('the lanes command', () => {
  let redis: TestRedis;
  let t: TestStack;
  let dir: string;
  let env: NodeJS.ProcessEnv;

  const run = async (...argv: string[]) => {
    const out: string[] = [];
    const code = await main(argv, env, (s) => out.push(s));
    return { code, text: out.join('\n') };
  };

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-cli-'));
    t = await startTestStack(redis.url, [{ name: 'cli', slots: 1, agent: [process.execPath, DEMO_AGENT] }]);
    env = { LANES_API_URL: t.stack.url! };
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('enqueues, shows status and lanes as tables', async () => {
    const enq = await run('enqueue', '--lane', 'cli', '--title', 'From the CLI', '--id', 'cli-1');
    expect(enq.code).toBe(0);
    expect(enq.text).toMatch(/^card\s+state\s+new$/m);
    expect(enq.text).toMatch(/^cli-1\s+queued\s+yes$/m);
    await t.api.waitCard('cli-1', 'done', (c) => c.state === 'done');

    const status = await run('status', 'cli-1');
    expect(status.code).toBe(0);
    expect(status.text).toMatch(/^cli-1\s+cli\s+done\s/m);
    expect(status.text).toMatch(/^\S+Z\s+running\s+1\s+lsb-/m);
    expect(status.text).toContain('result: {"branch":"lanes/cli-1"');

    const lanes = await run('lanes');
    expect(lanes.text).toMatch(/^lane\s+provider\s+waiting/m);
    expect(lanes.text).toMatch(/^cli\s+local\s+0\s+0\s+0\s+0\s+1\s+0\s+0 \/ 10000\s+1\s+1\s+closed\s+no$/m);
    expect(lanes.text).toMatch(/^cli\s+\S+-cli-0\s+lsb-\S+\s+live\s+\d+/m);
  });

  it('says what went wrong, with a non-zero exit', async () => {
    const again = await run('cancel', 'cli-1');
    expect(again.code).toBe(1);
    expect((await run('status', 'nope')).code).toBe(1);
    expect((await run('status')).code).toBe(2);
    const down = await main(['lanes'], { LANES_API_URL: 'http://127.0.0.1:9' }, () => undefined);
    expect(down).toBe(1);
  });

  it('refuses a bad config at boot, naming the key', () => {
    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ lanes: [{ name: 'x', slots: 0, agent: [] }] }));
    const res = spawnSync(process.execPath, [BIN, 'up', '--config', bad], { encoding: 'utf8', env: { ...process.env, REDIS_URL: redis.url }, timeout: 30_000 });
    expect(res.status).toBe(1);
    expect(res.stderr).toContain('lanes.0.slots');
    expect(res.stderr).toContain('lanes.0.agent');
  });

  it('refuses a bad environment at boot, naming the variable', () => {
    const res = spawnSync(process.execPath, [BIN, 'up'], { encoding: 'utf8', env: { ...process.env, REDIS_URL: redis.url, LANES_PORT: 'eighty' }, timeout: 30_000 });
    expect(res.status).toBe(1);
    expect(res.stderr).toContain('invalid environment: LANES_PORT');
  });

  it('starts with nothing from the runtime on stderr, on each Node the suite runs on (no deprecation warning)', () => {
    const res = spawnSync(process.execPath, [BIN, 'up'], { encoding: 'utf8', env: { ...process.env, REDIS_URL: redis.url, LANES_PORT: 'eighty' }, timeout: 30_000 });
    expect(res.status).toBe(1);
    expect(res.stderr.trim().split('\n')).toEqual([expect.stringMatching(/^lanes: invalid environment: LANES_PORT/)]);
  });

  it('says a port is taken instead of crashing, and leaves nothing running', async () => {
    const holder = createServer();
    await new Promise<void>((r) => holder.listen(0, '127.0.0.1', () => r()));
    const port = (holder.address() as { port: number }).port;
    const sandboxDir = join(dir, 'port-taken');
    try {
      const res = spawnSync(process.execPath, [BIN, 'up'], {
        encoding: 'utf8',
        env: { ...process.env, REDIS_URL: redis.url, LANES_PORT: String(port), LANES_SANDBOX_DIR: sandboxDir, LANES_LOG_LEVEL: 'silent' },
        timeout: 30_000,
      });
      expect(res.status).toBe(1);
      expect(res.stderr).toContain('EADDRINUSE');
      expect(res.stderr).toContain('LANES_PORT');
      expect(res.stderr).not.toContain('    at ');
      // The API is started first, so no sandbox was ever created for a stack that could not listen.
      expect(existsSync(sandboxDir) ? readdirSync(sandboxDir) : []).toEqual([]);
    } finally {
      holder.close();
    }
  });

  it('status --watch follows a card until it ends, then shows it', async () => {
    // Blocked first, so the watch starts on a card that is not over yet.
    await t.api.request('POST', '/v1/cards', { id: 'cli-watch', lane: 'cli', title: 'watched', metadata: { needsHuman: 'go?' } });
    await t.api.waitCard('cli-watch', 'blocked', (c) => c.state === 'blocked');
    const out: string[] = [];
    const watching = main(
      ['status', 'cli-watch', '--watch'],
      env,
      (s) => out.push(s),
      new AbortController().signal,
      () => undefined,
    );
    await waitFor('the watch to start', () => out.some((l) => l.includes('following it until it ends')));
    await t.api.request('POST', '/v1/cards/cli-watch/cancel');
    expect(await watching).toBe(0);
    const text = out.join('\n');
    expect(text).toMatch(/^\S+Z\s+cli\s+card\.cancelled\s+card=cli-watch/m);
    expect(text).toMatch(/^cli-watch\s+cli\s+cancelled\s/m);
  });

  it("tail --lane prints a card's lifecycle down to done, and resumes after the API restarts under it", async () => {
    // An API of its own on the stack's Redis, which the test stops and starts again on the same port.
    const port = await freePort();
    const startApi = () => startApiOnly(redis.url, t.lanes, port);
    let api: Stack = await startApi();
    const lines: string[] = [];
    const notes: string[] = [];
    const controller = new AbortController();
    const tailing = main(
      ['tail', '--lane', 'cli'],
      { LANES_API_URL: `http://127.0.0.1:${port}` },
      (s) => lines.push(s),
      controller.signal,
      (s) => notes.push(s),
    );
    try {
      await waitFor('tail to follow', () => notes.some((n) => n.startsWith('following events of lane cli')));
      await t.api.request('POST', '/v1/cards', { id: 'cli-tail-1', lane: 'cli', title: 'tailed' });
      await waitFor('cli-tail-1 done in the tail', () => lines.some((l) => /card\.done\s+card=cli-tail-1/.test(l)));
      // Down while the next card runs its whole life: the tail must pick it up from where it was.
      await api.stop();
      await t.api.request('POST', '/v1/cards', { id: 'cli-tail-2', lane: 'cli', title: 'while the API was down' });
      await t.api.waitCard('cli-tail-2', 'done', (c) => c.state === 'done');
      api = await startApi();
      await waitFor('cli-tail-2 done in the tail', () => lines.some((l) => /card\.done\s+card=cli-tail-2/.test(l)));
    } finally {
      controller.abort();
      await api.stop();
    }
    expect(await tailing).toBe(0);
    expect(notes.some((n) => n.startsWith('disconnected'))).toBe(true);
    expect(notes.some((n) => n.startsWith('reconnected, resuming after'))).toBe(true);
    for (const id of ['cli-tail-1', 'cli-tail-2']) {
      const mine = lines.filter((l) => l.includes(`card=${id}`)).map((l) => l.split(/\s+/)[2]);
      // Each event once, in order: nothing lost and nothing repeated across the restart.
      expect(mine).toEqual(['card.queued', 'card.running', 'card.done']);
    }
    expect(lines.every((l) => /^\S+Z\s+cli\s+\S+/.test(l))).toBe(true);
  });
});
