import { SandboxGoneError } from '@lanes/contracts';
import type { ExecOptions, ExecResult } from '@lanes/sandbox';
import { CANCELLED_EXIT_CODE } from '../src/exec-result.js';
import { ExecQueue } from '../src/exec-queue.js';
import { describe, expect, it } from 'vitest';

/** A raw exec whose commands finish only when the test says so; records what ran and overlap. */
function controllableRaw() {
  const started: string[] = [];
  const finishers = new Map<string, (result: ExecResult) => void>();
  let running = 0;
  let maxRunning = 0;
  const raw = (argv: readonly string[], _options: ExecOptions): Promise<ExecResult> => {
    const name = argv.join(' ');
    started.push(name);
    running += 1;
    maxRunning = Math.max(maxRunning, running);
    return new Promise<ExecResult>((resolve) => {
      finishers.set(name, (result) => {
        running -= 1;
        resolve(result);
      });
    });
  };
  const finish = (name: string, exitCode = 0): void => {
    const done = finishers.get(name);
    if (!done) throw new Error(`${name} has not started`);
    done({ exitCode, stdout: name, stderr: '', timedOut: false, cancelled: false, durationMs: 1 });
  };
  return { raw, started, finish, maxRunning: () => maxRunning };
}

const flush = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe('ExecQueue', () => {
  it('runs one command at a time in submission order', async () => {
    const fake = controllableRaw();
    const queue = new ExecQueue(fake.raw);
    const a = queue.exec(['a']);
    const b = queue.exec(['b']);
    const c = queue.exec(['c']);
    await flush();
    expect(fake.started).toEqual(['a']);
    expect(queue.queued).toBe(2);
    fake.finish('a');
    expect((await a).stdout).toBe('a');
    await flush();
    expect(fake.started).toEqual(['a', 'b']);
    fake.finish('b');
    await flush();
    fake.finish('c');
    expect((await b).stdout).toBe('b');
    expect((await c).stdout).toBe('c');
    expect(fake.maxRunning()).toBe(1);
    expect(queue.busy).toBe(false);
  });

  it('removes a queued command whose signal fires and resolves it as cancelled with exit 130', async () => {
    let nowMs = 1_000;
    const fake = controllableRaw();
    const queue = new ExecQueue(fake.raw, { now: () => nowMs });
    const a = queue.exec(['a']);
    const abort = new AbortController();
    const b = queue.exec(['b'], { signal: abort.signal });
    const c = queue.exec(['c']);
    nowMs += 25;
    abort.abort();
    expect(await b).toEqual({ exitCode: CANCELLED_EXIT_CODE, stdout: '', stderr: '', timedOut: false, cancelled: true, durationMs: 25 });
    expect(queue.queued).toBe(1);
    fake.finish('a');
    await a;
    await flush();
    fake.finish('c');
    await c;
    expect(fake.started).toEqual(['a', 'c']);
  });

  it('never queues a command whose signal is already aborted', async () => {
    const fake = controllableRaw();
    const queue = new ExecQueue(fake.raw);
    expect(await queue.exec(['x'], { signal: AbortSignal.abort() })).toMatchObject({ cancelled: true, exitCode: CANCELLED_EXIT_CODE });
    expect(fake.started).toEqual([]);
  });

  it('hands the signal to the raw exec once the command has started', async () => {
    const seen: (AbortSignal | undefined)[] = [];
    const queue = new ExecQueue(async (_argv, options) => {
      seen.push(options.signal);
      return { exitCode: 0, stdout: '', stderr: '', timedOut: false, cancelled: false, durationMs: 0 };
    });
    const abort = new AbortController();
    await queue.exec(['a'], { signal: abort.signal });
    expect(seen).toEqual([abort.signal]);
  });

  it('keeps going after a command rejects (sync throw or rejection), passing the error to its caller', async () => {
    let calls = 0;
    const queue = new ExecQueue((argv) => {
      calls += 1;
      if (argv[0] === 'throw') throw new SandboxGoneError('s1');
      if (argv[0] === 'reject') return Promise.reject(new SandboxGoneError('s1'));
      return Promise.resolve({ exitCode: 0, stdout: 'ok', stderr: '', timedOut: false, cancelled: false, durationMs: 0 });
    });
    const results = await Promise.allSettled([queue.exec(['throw']), queue.exec(['reject']), queue.exec(['fine'])]);
    expect(results[0]).toMatchObject({ status: 'rejected', reason: expect.any(SandboxGoneError) });
    expect(results[1]).toMatchObject({ status: 'rejected', reason: expect.any(SandboxGoneError) });
    expect(results[2]).toMatchObject({ status: 'fulfilled', value: { stdout: 'ok' } });
    expect(calls).toBe(3);
  });

  it('rejectQueued fails every waiting command but not the running one', async () => {
    const fake = controllableRaw();
    const queue = new ExecQueue(fake.raw);
    const a = queue.exec(['a']);
    const b = queue.exec(['b']);
    const c = queue.exec(['c'], { signal: new AbortController().signal });
    await flush();
    queue.rejectQueued(new SandboxGoneError('s1', 'root exited'));
    await expect(b).rejects.toBeInstanceOf(SandboxGoneError);
    await expect(c).rejects.toBeInstanceOf(SandboxGoneError);
    fake.finish('a');
    expect((await a).exitCode).toBe(0);
    expect(fake.started).toEqual(['a']);
  });
});
