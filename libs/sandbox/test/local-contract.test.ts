import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { detectIsolation, probeSeparateUid } from '@lanes/sandbox';
import { describe } from 'vitest';
import { runSandboxContract } from './contract-suite.js';
import { localFixture } from './support/local-fixture.js';

// Every fencing mode the machine allows runs the full contract: production machines differ in
// whether unshare works, and whether the worker may run agents as uids of their own.
// The fixture's sandboxes live in a directory of their own under tmpdir(), as this probe's would.
const separateUid = probeSeparateUid(join(tmpdir(), 'lanes-sbx-test-probe'));
if (detectIsolation() === 'pid-namespace' && separateUid.ok) {
  runSandboxContract('local (separate-uid)', () => localFixture({ isolation: 'separate-uid' }));
} else {
  describe.skip(`sandbox provider contract: local (separate-uid) — ${separateUid.ok ? 'unshare is not permitted here' : separateUid.why}`, () => {});
}
if (detectIsolation() === 'pid-namespace') {
  runSandboxContract('local (pid-namespace)', () => localFixture({ isolation: 'pid-namespace' }));
} else {
  describe.skip('sandbox provider contract: local (pid-namespace) — unshare is not permitted here', () => {});
}
runSandboxContract('local (process-group)', () => localFixture({ isolation: 'process-group' }));
