import { type ChildProcess, fork } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import type { StackProcessConfig, StackProcessReady } from '../../bench/support/stack-process.js';
import { startRedis, waitFor } from '../harness/index.js';

const stackProcess = new URL('../../bench/support/stack-process.ts', import.meta.url).pathname;

/** The benches' stack in a process of its own (bench/support/stack-process.ts) must not outlive the bench that forked it. */
describe('bench: the stack process', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-stack-process-test-'));
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child && child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  it('ends once the bench is gone, even when the bench took its Redis with it', async () => {
    const redis = await startRedis();
    const config: StackProcessConfig = {
      redisUrl: redis.url,
      lanes: [{ name: 'orphan', slots: 1, agent: ['true'] }],
      parts: { api: true, worker: true, supervisor: true },
      provider: 'null',
      heartbeatIntervalMs: 1_000,
      sandboxDir: join(dir, 'sandboxes'),
    };
    const stack = fork(stackProcess, [JSON.stringify(config)], { execArgv: ['--conditions=@lanes/source', '--import', 'tsx'], stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    child = stack;
    let exit: { code: number | null } | undefined;
    stack.once('exit', (code) => {
      exit = { code };
    });
    await new Promise<StackProcessReady>((resolve, reject) => {
      stack.once('message', (m: StackProcessReady) => resolve(m));
      stack.once('exit', (code) => reject(new Error(`stack process exited ${code} before it was ready`)));
    });
    // What a SIGKILLed bench leaves: Redis gone (the harness's redis-server ends with its parent), the IPC channel closed.
    await redis.stop();
    stack.disconnect();
    const ended = await waitFor('the orphaned stack process to exit', async () => exit, { intervalMs: 100, timeoutMs: 20_000 });
    expect(ended.code).not.toBeNull();
  }, 40_000);
});
