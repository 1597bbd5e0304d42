import { spawn } from 'node:child_process';
import { Status } from 'nice-grpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderInvalidError, ProviderUnavailableError, SandboxGoneError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import { MODAL_TEST_KILL_GRACE_MS, SDK_CONTROL_ATTEMPTS, SDK_ROUTER_ATTEMPTS, modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';
import { findByEnvEntry } from '../src/proc.js';
import { outputWatcher, waitFor } from './support/wait-for.js';

// ModalSandboxHandle on the real SDK (modal@0.11.1) over the local Modal server.

let f: ModalFixture;
const handles: SandboxHandle[] = [];

beforeEach(async () => {
  f = await modalFixture();
});

afterEach(async () => {
  for (const h of handles.splice(0)) await h.terminate().catch(() => undefined);
  await f.cleanup();
});

async function create(slot = 's1', options = {}): Promise<SandboxHandle> {
  const handle = await f.provider.create(modalTestSpec(slot), options);
  handles.push(handle);
  return handle;
}

/** The execs the server started in one sandbox, in order (the canary included). */
function execsOf(id: string): string[][] {
  return (f.server.sandbox(id)?.execs ?? []).map((e) => e.argv);
}

describe('ModalSandboxHandle.exec', () => {
  it('returns exit code and output; streams it live; argv is passed as separate args to the group wrapper', async () => {
    const handle = await create();
    const chunks: string[] = [];
    const result = await handle.exec(['sh', '-c', 'echo out; echo err >&2; exit 3'], { onOutput: (s, c) => chunks.push(`${s}:${c}`) });
    expect(result).toMatchObject({ exitCode: 3, stdout: 'out\n', stderr: 'err\n', timedOut: false, cancelled: false });
    expect(chunks).toEqual(expect.arrayContaining(['stdout:out\n', 'stderr:err\n']));
    const sent = execsOf(handle.id).at(-1)!;
    expect(sent.slice(0, 2)).toEqual(['sh', '-c']);
    // sh -c WRAPPER lanes-exec <execId> <end|keep> <argv...>: the card's argv is never inside the script.
    expect(sent.slice(3, 4)).toEqual(['lanes-exec']);
    expect(sent.slice(5)).toEqual(['keep', 'sh', '-c', 'echo out; echo err >&2; exit 3']);
    expect(sent[2]).not.toContain('echo out');
  });

  it("endLeftovers: what the card's last command and an earlier one left running is gone when its result comes back; without it, it stays", async () => {
    const handle = await create();
    const nonce = `leftover-${process.pid}-${Date.now()}`;
    const marked = () => findByEnvEntry(`CONTRACT_TREE=${nonce}`, new Set([process.pid])).map((p) => p.pid);
    // In its group, in a session of its own, and in a group of its own within its session.
    const leave = 'sleep 300 & setsid sleep 300 & perl -e "setpgrp(0, 0); sleep 300" & echo left';
    expect((await handle.exec(['sh', '-c', leave], { env: { CONTRACT_TREE: nonce } })).stdout).toBe('left\n');
    await waitFor('three leftovers', () => marked().length === 3);
    const last = await handle.exec(['sh', '-c', leave], { env: { CONTRACT_TREE: nonce }, endLeftovers: true });
    expect(last).toMatchObject({ exitCode: 0, stdout: 'left\n' });
    expect(execsOf(handle.id).at(-1)!.slice(5, 6)).toEqual(['end']);
    expect(marked()).toEqual([]);
    expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
  });

  it("endLeftovers ends this sandbox's marked processes only: another sandbox's, and a local sandbox's command on the same host, live on", async () => {
    const handle = await create('s1');
    const other = await create('s2');
    const nonce = `bystander-${process.pid}-${Date.now()}`;
    const marked = () => findByEnvEntry(`CONTRACT_TREE=${nonce}`, new Set([process.pid])).map((p) => p.pid);
    // Another Modal sandbox's leftover, and a process marked as a local sandbox's command is (LANES_EXEC_ID=<id>:<n>).
    await other.exec(['sh', '-c', 'setsid sleep 300 & echo left'], { env: { CONTRACT_TREE: nonce } });
    const local = spawn('sleep', ['300'], { env: { ...process.env, CONTRACT_TREE: nonce, LANES_EXEC_ID: 'lsb-bystander-00000000:1' }, stdio: 'ignore', detached: true });
    try {
      await waitFor('two bystanders', () => marked().length === 2);
      const bystanders = marked().sort();
      // Its own leftover carries the same env, so it would be seen were it left.
      await handle.exec(['sh', '-c', 'setsid sleep 300 & echo left'], { env: { CONTRACT_TREE: nonce }, endLeftovers: true });
      expect(marked().sort()).toEqual(bystanders);
      expect(bystanders).toContain(local.pid);
    } finally {
      local.kill('SIGKILL');
      for (const pid of marked()) process.kill(pid, 'SIGKILL');
    }
  });

  it.each([
    ['SIGTERM', 'kill -TERM $$', 143],
    ['SIGKILL', 'kill -KILL $$', 137],
    ['SIGINT', 'kill -INT $$', 130],
  ])('a command ended by %s reports 128+signal', async (_sig, script, code) => {
    const handle = await create();
    expect((await handle.exec(['sh', '-c', script])).exitCode).toBe(code);
  });

  it('passes a backstop timeoutMs beyond the lanes deadline, rounded up to the whole seconds the SDK accepts', async () => {
    const handle = await create();
    // 10 000 + 3 × 100 + the fixture's 2 000 margin = 12 300 → 13 000 (the SDK rejected 12 300).
    expect(await handle.exec(['true'], { timeoutMs: 10_000, killGraceMs: 100 })).toMatchObject({ exitCode: 0 });
    const last = f.server.sandbox(handle.id)!.execs.at(-1)!;
    expect(last.timeoutMs).toBe(13_000);
    expect(last.cwd).toBe(handle.workdir);
  });

  it('the kill exec after a timeout gets a whole-second backstop too', async () => {
    const handle = await create();
    await handle.exec(['sleep', '30'], { timeoutMs: 100, killGraceMs: 150 });
    const kill = f.server.sandbox(handle.id)!.execs.find((e) => e.argv[3] === 'lanes-kill')!;
    expect(kill.timeoutMs! % 1_000).toBe(0);
  });

  it('an exec deadline no rounding can fix is a configuration error naming the value; nothing is started', async () => {
    const handle = await create();
    const before = f.server.faults.calls('TaskExecStart');
    const error = await handle.exec(['true'], { timeoutMs: Number.POSITIVE_INFINITY }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderInvalidError);
    expect((error as Error).message).toContain('exec timeoutMs must be a positive, finite number of milliseconds, got Infinity');
    expect(f.server.faults.calls('TaskExecStart')).toBe(before);
  });

  it('timeout kills the group through a second exec, never the sandbox; the next command runs', async () => {
    const handle = await create();
    const before = execsOf(handle.id).length;
    const result = await handle.exec(['sleep', '30'], { timeoutMs: 200, killGraceMs: MODAL_TEST_KILL_GRACE_MS });
    expect(result).toMatchObject({ timedOut: true, cancelled: false, exitCode: 130 });
    const sent = execsOf(handle.id).slice(before);
    expect(sent).toHaveLength(2);
    expect(sent[1]?.[3]).toBe('lanes-kill');
    expect(f.server.faults.calls('SandboxTerminateV2')).toBe(0);
    expect(await handle.exec(['echo', 'next'])).toMatchObject({ exitCode: 0, stdout: 'next\n' });
    expect(await handle.poll()).toEqual({ state: 'live' });
  });

  it('cancel escalates INT → TERM → KILL for a command that ignores INT and TERM', async () => {
    const handle = await create();
    const abort = new AbortController();
    const watcher = outputWatcher('ready');
    const running = handle.exec(['sh', '-c', 'trap "" INT TERM; echo ready; while :; do sleep 0.05; done'], {
      signal: abort.signal,
      killGraceMs: MODAL_TEST_KILL_GRACE_MS,
      onOutput: watcher.onOutput,
    });
    await watcher.seen;
    abort.abort();
    expect(await running).toMatchObject({ cancelled: true, timedOut: false, exitCode: 137 });
    expect(await handle.exec(['true'])).toMatchObject({ exitCode: 0 });
  });

  it('a sandbox terminated mid-command makes exec reject with SandboxGoneError at the next liveness poll, though the SDK wait hangs', async () => {
    // The server's other forms (modal-task-end has the default): the dead task's router answers
    // UNAVAILABLE, which the SDK retries, and the running command's end is an error, not a status.
    f.server.router.finishedTaskCode = Status.UNAVAILABLE;
    f.server.router.execsAtTaskEnd = 'error';
    const handle = await create();
    const watcher = outputWatcher('started');
    const polls = () => f.server.faults.calls('SandboxWaitV2', handle.id);
    const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { onOutput: watcher.onOutput });
    const settled = running.then(
      () => ({ outcome: 'resolved' as unknown, polls: polls() }),
      (e: unknown) => ({ outcome: e, polls: polls() }),
    );
    await watcher.seen;
    const pollsAtKill = polls();
    await f.provider.terminateById(handle.id); // from "elsewhere": the handle was not told
    const { outcome, polls: pollsAtSettle } = await settled;
    expect(outcome).toBeInstanceOf(SandboxGoneError);
    // The liveness poll ended it, not the (hanging) SDK wait: the first poll that reached the server
    // after the kill, or the next if one was already on its way ("live") as the kill landed.
    expect(pollsAtSettle - pollsAtKill).toBeGreaterThanOrEqual(1);
    expect(pollsAtSettle - pollsAtKill).toBeLessThanOrEqual(2);
    // Everything queued behind learns it too, and poll reports the exit code.
    await expect(handle.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
  });

  it("a sandbox that dies while a command is starting: SandboxGoneError from the liveness poll, not after the SDK's router retries", async () => {
    const handle = await create();
    const before = f.server.faults.calls('TaskExecStart');
    // The start is in flight (held by the server) when the sandbox dies; its router then never answers.
    f.server.faults.delay('TaskExecStart', 300);
    const starting = handle.exec(['true']).catch((e: unknown) => e);
    await waitFor('the exec start to reach the router', () => f.server.faults.calls('TaskExecStart') > before);
    f.server.killSandbox(handle.id);
    expect(await starting).toBeInstanceOf(SandboxGoneError);
    // Settled while the SDK was still retrying the dead task's router (it tries SDK_ROUTER_ATTEMPTS times).
    expect(f.server.faults.calls('TaskExecStart') - before).toBeLessThan(SDK_ROUTER_ATTEMPTS);
  });

  it("a transport failure when starting a command (past the SDK's retries) is ProviderUnavailableError, not a death", async () => {
    const handle = await create();
    f.server.faults.fail('TaskExecStart', { times: SDK_ROUTER_ATTEMPTS });
    await expect(handle.exec(['true'])).rejects.toBeInstanceOf(ProviderUnavailableError);
    expect(await handle.exec(['true'])).toMatchObject({ exitCode: 0 });
  });

  it('a transport failure of exec wait (the command still running) is ProviderUnavailableError, and the command is stopped by exec id before it throws', async () => {
    const handle = await create();
    const watcher = outputWatcher('started');
    const waitsBefore = f.server.faults.calls('TaskExecWait', handle.id);
    const running = handle.exec(['sh', '-c', 'echo started; sleep 30'], { onOutput: watcher.onOutput, killGraceMs: MODAL_TEST_KILL_GRACE_MS });
    await watcher.seen;
    // The SDK's long-poll of the wait is out; cut it, and answer its redial with a status the SDK does not retry.
    await waitFor('the exec wait to be in flight', () => f.server.faults.calls('TaskExecWait', handle.id) > waitsBefore);
    f.server.faults.fail('TaskExecWait', { code: Status.ABORTED, times: 1, sandboxId: handle.id });
    expect(f.server.dropRouterConnections()).toBeGreaterThan(0);
    await expect(running).rejects.toBeInstanceOf(ProviderUnavailableError);
    // Confirmed stopped before the error reached the caller: no next attempt can race it.
    const command = f.server.sandbox(handle.id)!.execs.find((e) => e.argv.includes('echo started; sleep 30'))!;
    expect(command.endedAt).toBeDefined();
    expect(execsOf(handle.id).at(-1)).toContain('lanes-kill');
    expect(await handle.exec(['true'])).toMatchObject({ exitCode: 0 });
  });

  it('a transport failure of the liveness poll does not fail a running command', async () => {
    const handle = await create();
    const before = f.server.faults.calls('SandboxWaitV2');
    f.server.faults.fail('SandboxWaitV2', { forMs: 600 });
    expect(await handle.exec(['sh', '-c', 'sleep 1; echo done'])).toMatchObject({ exitCode: 0, stdout: 'done\n' });
    expect(f.server.faults.calls('SandboxWaitV2')).toBeGreaterThan(before);
  });

  it('a router connection dropped mid-command: the SDK redials and resumes output at its offset; the result is whole', async () => {
    const handle = await create();
    const watcher = outputWatcher('first');
    const running = handle.exec(['sh', '-c', 'echo first; sleep 0.5; echo second'], { onOutput: watcher.onOutput });
    await watcher.seen;
    expect(f.server.dropRouterConnections()).toBeGreaterThan(0);
    expect(await running).toMatchObject({ exitCode: 0, stdout: 'first\nsecond\n' });
  });
});

describe('ModalSandboxHandle.poll / files / terminate', () => {
  it('poll: live, ProviderUnavailableError on transport failure, exited(code) after a death', async () => {
    const handle = await create();
    expect(await handle.poll()).toEqual({ state: 'live' });
    f.server.faults.fail('SandboxWaitV2', { code: Status.UNAVAILABLE, times: SDK_CONTROL_ATTEMPTS });
    await expect(handle.poll()).rejects.toBeInstanceOf(ProviderUnavailableError);
    f.server.killSandbox(handle.id, 0);
    // 0 is an exit code like any other.
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 0 });
  });

  it('a poll the control plane never answers fails at its deadline (the SDK sets none); the liveness race goes on', async () => {
    await f.cleanup();
    f = await modalFixture({ callTimeoutMs: 500 });
    const handle = await create();
    f.server.faults.delay('SandboxWaitV2', 60_000);
    await expect(handle.poll()).rejects.toBeInstanceOf(ProviderUnavailableError);
    // A command whose liveness polls hang still ends normally.
    expect(await handle.exec(['sh', '-c', 'sleep 1.2; echo done'])).toMatchObject({ exitCode: 0, stdout: 'done\n' });
    f.server.faults.delay('SandboxWaitV2', 0);
    expect(await handle.poll()).toEqual({ state: 'live' });
  });

  it('poll: missing on NOT_FOUND', async () => {
    const handle = await create();
    f.server.faults.fail('SandboxWaitV2', { code: Status.NOT_FOUND });
    expect(await handle.poll()).toEqual({ state: 'missing' });
  });

  it('a finished sandbox stays finished: once a poll saw exited(137), later polls answer it with no network call', async () => {
    const handle = await create();
    f.server.killSandbox(handle.id);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    const polls = f.server.faults.calls('SandboxWaitV2', handle.id);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    expect(f.server.faults.calls('SandboxWaitV2', handle.id)).toBe(polls);
  });

  it('writeFile/readFile through the SDK filesystem API; relative paths are under the workdir', async () => {
    const handle = await create();
    await handle.writeFile('cards/c1.json', '{"id":"c1"}');
    expect((await handle.exec(['cat', 'cards/c1.json'])).stdout).toBe('{"id":"c1"}');
    expect(new TextDecoder().decode(await handle.readFile(`${handle.workdir}/cards/c1.json`))).toBe('{"id":"c1"}');
    expect(await handle.readFile('cards/missing.json')).toBeUndefined();
  });

  it('a transport failure in a file operation (the SDK reports it as NotFoundError) is not read as a death', async () => {
    const handle = await create();
    // The SDK's filesystem helpers exec a tool; a failed exec start becomes NotFoundError "unavailable".
    // The sandbox polls live, so the write is tried once more (modal-not-found); both refused → unavailable.
    f.server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 2 });
    await expect(handle.writeFile('x.txt', 'x')).rejects.toBeInstanceOf(ProviderUnavailableError);
    f.server.faults.fail('TaskExecStart', { code: Status.UNAVAILABLE, times: SDK_ROUTER_ATTEMPTS });
    await expect(handle.readFile('x.txt')).rejects.toBeInstanceOf(ProviderUnavailableError);
    f.server.killSandbox(handle.id);
    await expect(handle.writeFile('x.txt', 'x')).rejects.toBeInstanceOf(SandboxGoneError);
  });

  it('a capacity error (RESOURCE_EXHAUSTED) in a file operation is transient, not a configuration error', async () => {
    const handle = await create();
    // The SDK folds it into its catch-all SandboxFilesystemError ("unexpected error").
    f.server.faults.fail('TaskExecStart', { code: Status.RESOURCE_EXHAUSTED });
    await expect(handle.writeFile('x.txt', 'x')).rejects.toBeInstanceOf(ProviderUnavailableError);
    await handle.writeFile('x.txt', 'x');
  });

  it("a sandbox that dies while a file write waits on its helper: SandboxGoneError from the liveness poll, not at the write's deadline", async () => {
    await f.cleanup();
    // The dead task's router answers UNAVAILABLE, which the SDK's exec wait retries forever.
    f = await modalFixture({ fileOpTimeoutMs: 30_000 }, { router: { finishedTaskCode: Status.UNAVAILABLE, execsAtTaskEnd: 'error' } });
    const handle = await create();
    const waits = () => f.server.faults.calls('TaskExecWait', handle.id);
    const before = waits();
    f.server.faults.delay('TaskExecWait', 500, { sandboxId: handle.id, times: 1 });
    const writing = handle.writeFile('cards/c1/card.json', '{"id":"c1"}').catch((e: unknown) => e);
    await waitFor("the write's helper to be waited on", () => waits() > before);
    f.server.killSandbox(handle.id);
    const waitsAtKill = waits();
    expect(await writing).toBeInstanceOf(SandboxGoneError);
    // Settled by the poll, while the SDK was still retrying the dead task's wait.
    expect(waits() - waitsAtKill).toBeLessThan(SDK_ROUTER_ATTEMPTS);
  }, 60_000);

  it('a file read whose helper never reports back (the SDK waits forever) fails at its deadline as ProviderUnavailableError', async () => {
    await f.cleanup();
    f = await modalFixture({ fileOpTimeoutMs: 1_000 });
    const handle = await create();
    await handle.writeFile('out/result.json', '{}');
    f.server.faults.fail('TaskExecWait', { forMs: 60_000, sandboxId: handle.id });
    await expect(handle.readFile('out/result.json')).rejects.toBeInstanceOf(ProviderUnavailableError);
    f.server.faults.clear();
    expect(new TextDecoder().decode(await handle.readFile('out/result.json'))).toBe('{}');
  });

  it('terminate ends the sandbox (137), is idempotent, and later calls throw SandboxGoneError without a round trip', async () => {
    const handle = await create();
    await handle.terminate();
    await handle.terminate();
    expect(f.server.sandbox(handle.id)).toMatchObject({ running: false, exitCode: 137 });
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    const calls = f.server.faults.total();
    await expect(handle.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
    await expect(handle.readFile('x')).rejects.toBeInstanceOf(SandboxGoneError);
    expect(f.server.faults.total()).toBe(calls);
  });
});
