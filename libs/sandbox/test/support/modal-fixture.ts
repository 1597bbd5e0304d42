import { join } from 'node:path';
import type { SandboxSpec } from '@lanes/contracts';
import { ModalProvider, createModalDouble, type ModalDouble, type ModalProviderOptions } from '@lanes/sandbox';
import { pidsWithEnv } from '../../src/testing/modal-double-sweep.js';
import type { ContractFixture } from '../contract-suite.js';

/** Short grace and a tight liveness poll keep the double's tests quick while exercising every step. */
export const MODAL_TEST_KILL_GRACE_MS = 200;
export const MODAL_TEST_LIVENESS_POLL_MS = 50;

export function modalTestSpec(slot = 's1'): SandboxSpec {
  return { image: 'debian:bookworm-slim', tags: { lane: 'contract', slot, worker: `w-${process.pid}` }, env: { LANES_TEST_SPEC_ENV: 'from-spec' } };
}

export interface ModalFixture extends ContractFixture {
  provider: ModalProvider;
  double: ModalDouble;
}

/** A fresh SDK double and a Modal provider on it; cleanup kills every double sandbox and its temp dir. */
export async function modalFixture(options: ModalProviderOptions = {}): Promise<ModalFixture> {
  const double = createModalDouble();
  const provider = new ModalProvider(double, {
    appName: 'lanes-test',
    // The double shares the host filesystem; keep the lanes workdir inside its temp dir.
    workdir: join(double.rootDir, 'work'),
    livenessPollIntervalMs: MODAL_TEST_LIVENESS_POLL_MS,
    backstopMarginMs: 2_000,
    outputDrainMs: 500,
    connectTimeoutMs: 10_000,
    ...options,
  });
  return {
    provider,
    double,
    spec: modalTestSpec(),
    killGraceMs: MODAL_TEST_KILL_GRACE_MS,
    liveHostPids: (envEntry) => {
      const at = envEntry.indexOf('=');
      return pidsWithEnv(envEntry.slice(0, at), envEntry.slice(at + 1));
    },
    // The container dies from the outside (host loss, OOM): Modal then reports it finished.
    killRoot: async (handle) => double.kill(handle.id),
    cleanup: async () => {
      await provider.close();
      double.shutdown();
    },
  };
}
