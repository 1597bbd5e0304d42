import { createFaultyProvider } from '@lanes/sandbox/testing';
import { runSandboxContract } from './contract-suite.js';
import { localFixture } from './support/local-fixture.js';
import { modalFixture } from './support/modal-fixture.js';

// With an empty plan the faulty wrapper must keep every promise of the provider it wraps.
runSandboxContract('faulty (empty plan) over modal (real SDK, local server)', async () => {
  const fixture = await modalFixture();
  return { ...fixture, provider: createFaultyProvider(fixture.provider) };
});

runSandboxContract('faulty (empty plan) over local', async () => {
  const fixture = await localFixture();
  return { ...fixture, provider: createFaultyProvider(fixture.provider) };
});
