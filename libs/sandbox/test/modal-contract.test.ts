import { runSandboxContract } from './contract-suite.js';
import { modalFixture } from './support/modal-fixture.js';

// The Modal provider on the real SDK (modal@0.11.1) over the local Modal server: real processes.
runSandboxContract('modal (real SDK, local server)', () => modalFixture());
