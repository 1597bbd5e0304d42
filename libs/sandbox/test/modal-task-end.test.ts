import { Status } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { SandboxGoneError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import type { ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { modalFixture, modalTestSpec, type ModalFixture } from './support/modal-fixture.js';
import { outputWatcher } from './support/wait-for.js';

// What a running command comes to when its sandbox's task ends under it, in each form the local
// server can take (issue 25, Deliver 3; docs/modal.md): on Modal the command's end arrives as its
// exit status (the container's SIGKILL: 137) and a poll tells the death (137 terminated, 124 the
// lifetime ran out); in the other form it arrives as a router error, which a poll confirms.
// Either way the sandbox's own code is what a poll reports, and what lanes records.

let f: ModalFixture | undefined;
afterEach(async () => {
  await f?.cleanup();
  f = undefined;
});

type End = 'killed from outside' | 'terminated elsewhere' | 'lifetime ran out';
const ENDS: ReadonlyArray<[End, number]> = [
  ['killed from outside', 137],
  ['terminated elsewhere', 137],
  ['lifetime ran out', 124],
];
const MODES: ReadonlyArray<[string, ModalServerOptions, 'status' | 'error']> = [
  ['default (NOT_FOUND, exit 137)', {}, 'status'],
  ['NOT_FOUND, ends as an error', { router: { execsAtTaskEnd: 'error' } }, 'error'],
  ['UNAVAILABLE, ends as an error', { router: { finishedTaskCode: Status.UNAVAILABLE, execsAtTaskEnd: 'error' } }, 'error'],
];
/** Whole seconds (the SDK's unit), short enough for a test, long enough for the connect canary. */
const SHORT_LIFETIME_MS = 3_000;

describe.each(MODES)('server %s', (_mode, serverOptions, form) => {
  it.each(ENDS)('a command running when the sandbox is %s: the poll says exited(%i)', async (end, code) => {
    // In the status form the liveness poll must not race the wait to the death: it polls rarely.
    // (The error form needs it: a router answering UNAVAILABLE leaves the wait hanging.)
    f = await modalFixture(form === 'status' ? { livenessPollIntervalMs: 60_000 } : {}, serverOptions);
    const handle: SandboxHandle = await f.provider.create(end === 'lifetime ran out' ? { ...modalTestSpec(), timeoutMs: SHORT_LIFETIME_MS } : modalTestSpec());
    const watcher = outputWatcher('started');
    const running = handle.exec(['sh', '-c', 'echo started; exec sleep 30'], { onOutput: watcher.onOutput }).then(
      (result) => result,
      (error: unknown) => error,
    );
    await watcher.seen;
    if (end === 'killed from outside') f.server.killSandbox(handle.id);
    if (end === 'terminated elsewhere') await f.provider.terminateById(handle.id);
    const ended = await running;
    if (form === 'status') {
      // Rule 1: an exit a death may be reported as; the supervisor's one poll tells.
      expect(ended).toMatchObject({ exitCode: 137, stdout: 'started\n', timedOut: false, cancelled: false });
    } else {
      expect(ended).toBeInstanceOf(SandboxGoneError);
      expect((ended as SandboxGoneError).observedExitCode).toBe(code);
    }
    expect(await handle.poll()).toEqual({ state: 'exited', exitCode: code });
    await expect(handle.exec(['true'])).rejects.toBeInstanceOf(SandboxGoneError);
  });
});
