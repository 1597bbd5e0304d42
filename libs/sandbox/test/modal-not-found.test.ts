import { Status } from 'nice-grpc';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ProviderUnavailableError, SandboxGoneError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import { MODAL_TEST_KILL_GRACE_MS, SDK_ROUTER_ATTEMPTS, modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';
import { outputWatcher, waitFor } from './support/wait-for.js';

// A command router's NOT_FOUND is a suspect, never a finding (DESIGN supervision rules 1-2; issue 25,
// Deliver 2): one poll() confirms it. Finished (exited/missing) → SandboxGoneError; live → the call is
// tried once more, then ProviderUnavailableError for the supervisor's poll + canary. Nothing is
// cached as gone from the router's word alone. On the real SDK (modal@0.11.1) over the local server.

let f: ModalFixture;
const handles: SandboxHandle[] = [];

beforeEach(async () => {
  f = await modalFixture();
});

afterEach(async () => {
  for (const h of handles.splice(0)) await h.terminate().catch(() => undefined);
  await f.cleanup();
});

async function create(): Promise<SandboxHandle> {
  const handle = await f.provider.create(modalTestSpec());
  handles.push(handle);
  return handle;
}

const polls = (id: string) => f.server.faults.calls('SandboxWaitV2', id);
const execsWith = (id: string, marker: string) => (f.server.sandbox(id)?.execs ?? []).filter((e) => e.argv.some((a) => a.includes(marker)));

describe('a stray NOT_FOUND from the command router of a live sandbox', () => {
  // Before: toLanesError read it as SandboxGoneError, the handle cached it, and every later call
  // (the supervisor's canary included) was refused: the live sandbox was terminated.
  it('on TaskExecStart: one poll says live, the start is tried again and the command runs; nothing is terminated', async () => {
    const handle = await create();
    const before = polls(handle.id);
    f.server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 1, sandboxId: handle.id });
    expect(await handle.exec(['sh', '-c', 'echo started-once'], { killGraceMs: MODAL_TEST_KILL_GRACE_MS })).toMatchObject({ exitCode: 0, stdout: 'started-once\n' });
    expect(polls(handle.id)).toBeGreaterThan(before);
    // The refused start was confirmed not running (kill by exec id) before the second start.
    expect(execsWith(handle.id, 'lanes-kill')).toHaveLength(1);
    expect(execsWith(handle.id, 'echo started-once')).toHaveLength(1);
    expect(f.server.faults.calls('SandboxTerminateV2', handle.id)).toBe(0);
    expect(await handle.poll()).toEqual({ state: 'live' });
    expect(await handle.exec(['echo', 'next'])).toMatchObject({ exitCode: 0, stdout: 'next\n' });
  });

  it('on TaskExecWait while the command runs: the command is waited for again, not killed, and its result is whole', async () => {
    const handle = await create();
    const watcher = outputWatcher('started');
    const waitsBefore = f.server.faults.calls('TaskExecWait', handle.id);
    const running = handle.exec(['sh', '-c', 'echo started; sleep 1; echo done'], { onOutput: watcher.onOutput, killGraceMs: MODAL_TEST_KILL_GRACE_MS });
    await watcher.seen;
    await waitFor('the exec wait to be in flight', () => f.server.faults.calls('TaskExecWait', handle.id) > waitsBefore);
    // Cut the wait's long-poll: the SDK redials it, and the router answers that once with NOT_FOUND.
    f.server.faults.fail('TaskExecWait', { code: Status.NOT_FOUND, times: 1, sandboxId: handle.id });
    const before = polls(handle.id);
    expect(f.server.dropRouterConnections()).toBeGreaterThan(0);
    expect(await running).toMatchObject({ exitCode: 0, stdout: 'started\ndone\n', timedOut: false, cancelled: false });
    expect(polls(handle.id)).toBeGreaterThan(before);
    expect(execsWith(handle.id, 'lanes-kill')).toHaveLength(0);
    expect(f.server.faults.calls('SandboxTerminateV2', handle.id)).toBe(0);
  });

  it('that persists past the retry: ProviderUnavailableError, never gone, and the canary that follows is not refused', async () => {
    const handle = await create();
    // Both starts of this one command are refused; the kill exec between them and the canary are not.
    f.server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 2, sandboxId: handle.id, argvIncludes: 'persistent-marker' });
    const error = await handle.exec(['sh', '-c', 'echo persistent-marker'], { killGraceMs: MODAL_TEST_KILL_GRACE_MS }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ProviderUnavailableError);
    expect(execsWith(handle.id, 'persistent-marker')).toHaveLength(0);
    // What the supervisor does next (rule 2): poll, then the nonce canary.
    expect(await handle.poll()).toEqual({ state: 'live' });
    expect(await handle.exec(['echo', 'lanes-canary-n1'])).toMatchObject({ exitCode: 0, stdout: 'lanes-canary-n1\n' });
    expect(f.server.sandbox(handle.id)!.running).toBe(true);
  });

  it('on a file write: one poll says live, the write is tried again and lands', async () => {
    const handle = await create();
    // The SDK's filesystem helper is an exec; its refused start becomes NotFoundError("…may have already shut down").
    f.server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 1, sandboxId: handle.id });
    const before = polls(handle.id);
    await handle.writeFile('nf.txt', 'landed');
    expect(polls(handle.id)).toBeGreaterThan(before);
    expect((await handle.exec(['cat', 'nf.txt'])).stdout).toBe('landed');
  });
});

describe('NOT_FOUND from the router of a finished sandbox', () => {
  it.each([
    ['NOT_FOUND', Status.NOT_FOUND],
    ['UNAVAILABLE', Status.UNAVAILABLE],
  ])('(router answers %s for a finished task): exec is SandboxGoneError with the exit code the poll found', async (_name, code) => {
    const handle = await create();
    f.server.router.finishedTaskCode = code;
    f.server.killSandbox(handle.id, 137);
    const before = f.server.faults.calls('TaskExecStart', handle.id);
    const error = await handle.exec(['true']).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(SandboxGoneError);
    expect((error as SandboxGoneError).observedExitCode).toBe(137);
    // Settled by a poll, not after the SDK's router retries (it tries SDK_ROUTER_ATTEMPTS times).
    expect(f.server.faults.calls('TaskExecStart', handle.id) - before).toBeLessThan(SDK_ROUTER_ATTEMPTS);
    await expect(handle.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
  });
});
