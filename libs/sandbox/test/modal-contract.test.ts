import { runSandboxContract } from './contract-suite.js';
import { modalFixture } from './support/modal-fixture.js';

// The Modal provider against the SDK double: real local processes behind the SDK's surface.
runSandboxContract('modal (SDK double)', () => modalFixture());
