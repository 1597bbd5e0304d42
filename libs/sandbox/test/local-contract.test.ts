import { detectIsolation } from '@lanes/sandbox';
import { describe } from 'vitest';
import { runSandboxContract } from './contract-suite.js';
import { localFixture } from './support/local-fixture.js';

// Both fencing modes run the full contract: production machines differ in whether unshare works.
if (detectIsolation() === 'pid-namespace') {
  runSandboxContract('local (pid-namespace)', () => localFixture({ isolation: 'pid-namespace' }));
} else {
  describe.skip('sandbox provider contract: local (pid-namespace) — unshare is not permitted here', () => {});
}
runSandboxContract('local (process-group)', () => localFixture({ isolation: 'process-group' }));
