import { readFileSync } from 'node:fs';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ConnectTimeoutError, ProviderUnavailableError, SandboxGoneError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import { type FaultyProvider, createFaultyProvider } from '@lanes/sandbox/testing';
import { findByEnvEntry } from '../src/proc.js';
import { SANDBOX_ID_ENV } from '../src/sandbox-reaper.js';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';
import { MODAL_TEST_KILL_GRACE_MS, modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';
import { outputWatcher, waitFor } from './support/wait-for.js';

const BARE_EXIT_1 = { exitCode: 1, stdout: '', stderr: '', timedOut: false, cancelled: false };

/** Host processes of one local-server sandbox whose command line contains `text`. */
function sandboxProcesses(sandboxId: string, text: string): number[] {
  return findByEnvEntry(`${SANDBOX_ID_ENV}=${sandboxId}`, new Set([process.pid]))
    .map((p) => p.pid)
    .filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(text);
      } catch {
        return false;
      }
    });
}

describe('FaultyProvider over the Modal provider (real SDK, local server)', () => {
  let f: ModalFixture;
  let faulty: FaultyProvider;
  const handles: SandboxHandle[] = [];

  beforeEach(async () => {
    f = await modalFixture();
    faulty = createFaultyProvider(f.provider);
  });

  afterEach(async () => {
    for (const h of handles.splice(0)) await h.terminate().catch(() => undefined);
    await f.cleanup();
  });

  async function create(slot = 's1'): Promise<SandboxHandle> {
    const handle = await faulty.create(modalTestSpec(slot));
    handles.push(handle);
    return handle;
  }

  it('with an empty plan it is transparent and carries the inner provider name', async () => {
    const handle = await create();
    expect(faulty.name).toBe('modal');
    expect(handle.id).toMatch(/^sb-/);
    expect(await handle.exec(['sh', '-c', 'echo hi; exit 4'])).toMatchObject({ exitCode: 4, stdout: 'hi\n' });
    expect(await handle.poll()).toEqual({ state: 'live' });
  });

  it('dieAfterCommands: the sandbox really dies as the Nth command starts; poll says exited(137)', async () => {
    faulty.setPlan({ dieAfterCommands: 2 });
    const handle = await create();
    expect(await handle.exec(['echo', 'one'])).toMatchObject({ exitCode: 0 });
    await expect(handle.exec(['echo', 'two'])).rejects.toBeInstanceOf(SandboxGoneError);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    expect(f.server.sandbox(handle.id)?.running).toBe(false);
    await expect(handle.exec(['echo', 'three'])).rejects.toBeInstanceOf(SandboxGoneError);
    expect(faulty.stats.sandboxesKilled).toBe(1);
  });

  it('bare exit 1, mode "dead": empty exit 1, and the sandbox is really dead (poll exited(137))', async () => {
    faulty.setPlan({ bareExit1Every: 2, bareExit1Mode: 'dead' });
    const handle = await create();
    expect(await handle.exec(['echo', 'one'])).toMatchObject({ exitCode: 0, stdout: 'one\n' });
    expect(await handle.exec(['echo', 'two'])).toMatchObject(BARE_EXIT_1);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    expect(f.server.sandbox(handle.id)?.running).toBe(false);
    await expect(handle.exec(['echo', 'nonce'])).rejects.toBeInstanceOf(SandboxGoneError);
  });

  it('bare exit 1, mode "live": empty exit 1 while the sandbox lives and a nonce canary still answers', async () => {
    faulty.setPlan({ bareExit1Every: 2, bareExit1Mode: 'live' });
    const handle = await create();
    await handle.exec(['true']);
    expect(await handle.exec(['echo', 'two'])).toMatchObject(BARE_EXIT_1);
    expect(await handle.poll()).toEqual({ state: 'live' });
    expect(await handle.exec(['echo', 'nonce-123'])).toMatchObject({ exitCode: 0, stdout: 'nonce-123\n' });
  });

  it('bare exit 1, mode "exited-0": the sandbox is terminated but poll reports exited(0) — 0 stays 0', async () => {
    faulty.setPlan({ bareExit1Every: 1, bareExit1Mode: 'exited-0' });
    const handle = await create();
    expect(await handle.exec(['echo', 'x'])).toMatchObject(BARE_EXIT_1);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 0 });
    expect(f.server.sandbox(handle.id)?.running).toBe(false);
  });

  it('hang: a command never returns by itself; timeout and cancel kill it, the sandbox stays usable', async () => {
    faulty.setPlan({ hang: true });
    const handle = await create();
    const timed = await handle.exec(['echo', 'never printed'], { timeoutMs: 200, killGraceMs: MODAL_TEST_KILL_GRACE_MS });
    expect(timed).toMatchObject({ timedOut: true, stdout: '' });
    expect(timed.exitCode).not.toBe(0);

    const abort = new AbortController();
    const running = handle.exec(['echo', 'x'], { signal: abort.signal, killGraceMs: MODAL_TEST_KILL_GRACE_MS });
    await waitFor('the hung command to run', () => sandboxProcesses(handle.id, '86400').length > 0);
    abort.abort();
    expect(await running).toMatchObject({ cancelled: true });
    await waitFor('no hung process left', () => sandboxProcesses(handle.id, '86400').length === 0);

    faulty.updatePlan({ hang: false });
    expect(await handle.exec(['echo', 'back'])).toMatchObject({ exitCode: 0, stdout: 'back\n' });
    expect(faulty.stats.hangsInjected).toBe(2);
  });

  it('targetCards: only commands of the named cards (LANES_CARD_ID) are faulted and counted', async () => {
    faulty.setPlan({ bareExit1Every: 1, bareExit1Mode: 'live', targetCards: ['c-1'] });
    const handle = await create();
    const card = (id: string) => ({ env: { LANES_CARD_ID: id } });
    expect(await handle.exec(['echo', 'canary'])).toMatchObject({ exitCode: 0, stdout: 'canary\n' });
    expect(await handle.exec(['echo', 'other'], card('c-2'))).toMatchObject({ exitCode: 0, stdout: 'other\n' });
    expect(await handle.exec(['echo', 'target'], card('c-1'))).toMatchObject(BARE_EXIT_1);

    faulty.setPlan({ dieAfterCommands: 2, targetCards: ['c-1'] });
    const fresh = await create('s2');
    await fresh.exec(['true']);
    await fresh.exec(['true'], card('c-2'));
    expect(await fresh.exec(['true'], card('c-1'))).toMatchObject({ exitCode: 0 });
    await expect(fresh.exec(['true'], card('c-1'))).rejects.toBeInstanceOf(SandboxGoneError);
  });

  it('createFailures: the next N creates fail with ProviderUnavailableError, counting down; then creates succeed', async () => {
    faulty.setPlan({ createFailures: 5 });
    for (let left = 4; left >= 0; left--) {
      await expect(faulty.create(modalTestSpec())).rejects.toBeInstanceOf(ProviderUnavailableError);
      expect(faulty.plan.createFailures).toBe(left);
    }
    const handle = await create();
    expect(await handle.exec(['true'])).toMatchObject({ exitCode: 0 });
    expect(faulty.stats).toMatchObject({ createsAttempted: 6, createFailuresInjected: 5 });
    // No sandbox was created by the failed attempts.
    expect(f.server.runningSandboxIds()).toEqual([handle.id]);
  });

  it('connectTimeouts: ConnectTimeoutError after the connect deadline, with no sandbox left behind', async () => {
    faulty.setPlan({ connectTimeouts: 1 });
    const startedAt = Date.now();
    await expect(faulty.create(modalTestSpec(), { connectTimeoutMs: 150 })).rejects.toBeInstanceOf(ConnectTimeoutError);
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(145);
    expect(f.server.faults.calls('SandboxCreateV2')).toBe(0);
    expect(faulty.plan.connectTimeouts).toBe(0);
    await create();
  });

  it('connectTimeouts honour an abort signal', async () => {
    faulty.setPlan({ connectTimeouts: 1 });
    const abort = new AbortController();
    const pending = faulty.create(modalTestSpec(), { connectTimeoutMs: 60_000, signal: abort.signal });
    abort.abort(new Error('shutting down'));
    await expect(pending).rejects.toThrow('shutting down');
  });

  it('pollErrors: poll throws a provider error until switched off at runtime', async () => {
    const handle = await create();
    faulty.updatePlan({ pollErrors: true });
    await expect(handle.poll()).rejects.toBeInstanceOf(ProviderUnavailableError);
    faulty.updatePlan({ pollErrors: false });
    expect(await handle.poll()).toEqual({ state: 'live' });
  });

  it('setPlan validates the plan and keeps the old one when invalid', () => {
    faulty.setPlan({ createFailures: 1 });
    expect(() => faulty.setPlan({ createFailures: -1 })).toThrow();
    expect(faulty.plan.createFailures).toBe(1);
  });
});

describe('FaultyProvider over the local provider (it wraps any provider)', () => {
  let f: LocalFixture;
  let faulty: FaultyProvider;

  beforeEach(async () => {
    f = await localFixture();
    faulty = createFaultyProvider(f.provider, { bareExit1Every: 1, bareExit1Mode: 'dead' });
  });

  afterEach(async () => {
    await f.cleanup();
  });

  it('"dead" mode really kills the local sandbox: bare exit 1, poll exited(137), next exec SandboxGoneError', async () => {
    const handle = await faulty.create(testSpec());
    expect(await handle.exec(['echo', 'x'])).toMatchObject(BARE_EXIT_1);
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: 137 });
    faulty.setPlan({});
    await expect(handle.exec(['echo', 'x'])).rejects.toBeInstanceOf(SandboxGoneError);
  });

  it('resetDirs is faulted as the command it replaces: it counts toward dieAfterCommands and bareExit1Every, and hangs', async () => {
    faulty.setPlan({ dieAfterCommands: 2 });
    const dying = await faulty.create(testSpec());
    const dir = `${dying.workdir}/cards/c/out`;
    expect(await dying.resetDirs([dir])).toMatchObject({ exitCode: 0 });
    await expect(dying.exec(['echo', 'second'])).rejects.toBeInstanceOf(SandboxGoneError);

    faulty.setPlan({ bareExit1Every: 2, bareExit1Mode: 'live' });
    const flaky = await faulty.create(testSpec());
    expect(await flaky.exec(['true'])).toMatchObject({ exitCode: 0 });
    expect(await flaky.resetDirs([`${flaky.workdir}/x`])).toMatchObject(BARE_EXIT_1);
    expect(faulty.stats.bareExit1Injected).toBe(1);

    faulty.setPlan({ hang: true });
    expect(await flaky.resetDirs([`${flaky.workdir}/x`], { timeoutMs: 200, killGraceMs: 100 })).toMatchObject({ timedOut: true });
    faulty.setPlan({});
    expect(await flaky.resetDirs([`${flaky.workdir}/x`])).toMatchObject({ exitCode: 0 });
    await flaky.terminate();
  });

  it('hang over local: the kill works', async () => {
    faulty.setPlan({ hang: true });
    const handle = await faulty.create(testSpec());
    const watcher = outputWatcher('never');
    const result = await handle.exec(['echo', 'never'], { timeoutMs: 200, killGraceMs: 100, onOutput: watcher.onOutput });
    expect(result).toMatchObject({ timedOut: true });
    faulty.setPlan({});
    expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
    await handle.terminate();
  });
});
