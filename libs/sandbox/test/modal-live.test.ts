import { randomBytes } from 'node:crypto';
import { describe, it, vi } from 'vitest';
import { createModalProvider } from '@lanes/sandbox';
import { runSandboxContract } from './contract-suite.js';

// The same contract as modal-contract.test.ts, against real Modal. Needs network and a token.
const hasToken = Boolean(process.env['MODAL_TOKEN_ID'] && process.env['MODAL_TOKEN_SECRET']);

if (hasToken) {
  // A cold image pull and sandbox start can take longer than the suite's default 60 s.
  vi.setConfig({ testTimeout: 300_000, hookTimeout: 300_000 });
  runSandboxContract('modal (live)', async () => {
    // A worker tag unique to this run, so cleanup reaps exactly what this run created.
    const worker = `live-${process.pid}-${randomBytes(4).toString('hex')}`;
    const provider = createModalProvider({
      appName: process.env['LANES_MODAL_TEST_APP'] ?? 'lanes-contract-test',
      // The contract expects a death under a running command to surface within two seconds.
      livenessPollIntervalMs: 500,
    });
    return {
      provider,
      spec: { image: process.env['LANES_MODAL_TEST_IMAGE'] ?? 'debian:bookworm-slim', tags: { lane: 'contract', slot: 's1', worker } },
      createOptions: { connectTimeoutMs: 240_000 },
      killGraceMs: 500,
      // "From outside": terminated by id through the provider, the way the supervisor reaps.
      killRoot: (handle) => provider.terminateById(handle.id),
      // Still to be settled on real Modal (docs/modal.md): the local server's default says 137.
      commandEndsOnDeath: ['gone', 137],
      cleanup: async () => {
        try {
          for (const ref of await provider.list({ worker })) await provider.terminateById(ref.id);
        } finally {
          await provider.close();
        }
      },
    };
  });
} else {
  describe('sandbox provider contract: modal (live)', () => {
    it.skip('skipped: MODAL_TOKEN_ID/MODAL_TOKEN_SECRET not set', () => {});
  });
}
