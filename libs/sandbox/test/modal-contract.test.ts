import { Status } from 'nice-grpc';
import type { ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { runSandboxContract } from './contract-suite.js';
import { modalFixture } from './support/modal-fixture.js';

// The Modal provider on the real SDK (modal@0.11.1) over the local Modal server: real processes.
// Run in the server's Modal-like default (a finished task's router answers NOT_FOUND; a command
// running when its task ends ends with exit status 137) and in the other form of each (UNAVAILABLE,
// which the SDK retries; the command's end as a router error). docs/modal.md has the evidence.
const MODES: ReadonlyArray<[string, ModalServerOptions]> = [
  ['default: finished task NOT_FOUND, running command ends 137', {}],
  ['finished task UNAVAILABLE, running command ends as an error', { router: { finishedTaskCode: Status.UNAVAILABLE, execsAtTaskEnd: 'error' } }],
];

for (const [mode, serverOptions] of MODES) {
  runSandboxContract(`modal (real SDK, local server; ${mode})`, () => modalFixture({}, serverOptions));
}
