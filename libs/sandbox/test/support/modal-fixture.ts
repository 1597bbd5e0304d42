import { join } from 'node:path';
import type { SandboxSpec } from '@lanes/contracts';
import { ModalProvider, type ModalProviderOptions } from '@lanes/sandbox/modal';
import { DEFAULT_ROUTER_BEHAVIOUR, startModalServer, type LocalModalServer, type ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { findByEnvEntry } from '../../src/proc.js';
import type { ContractFixture } from '../contract-suite.js';

/** Short grace and a tight liveness poll keep the tests quick while exercising every step. */
export const MODAL_TEST_KILL_GRACE_MS = 200;
export const MODAL_TEST_LIVENESS_POLL_MS = 50;
/**
 * The SDK retries transient failures itself, so a fault that must reach the provider outlasts them.
 * Control-plane unary calls: the first attempt + 3 retries (ModalClient's retryMiddleware).
 */
export const SDK_CONTROL_ATTEMPTS = 4;
/** Command-router unary calls: the first attempt + 10 retries, backing off from 10 ms (~10 s in all). */
export const SDK_ROUTER_ATTEMPTS = 11;

export function modalTestSpec(slot = 's1'): SandboxSpec {
  return { image: 'debian:bookworm-slim', tags: { lane: 'contract', slot, worker: `w-${process.pid}` }, env: { LANES_TEST_SPEC_ENV: 'from-spec' } };
}

export interface ModalFixture extends ContractFixture {
  provider: ModalProvider;
  server: LocalModalServer;
}

/**
 * A fresh local Modal server and the provider on the REAL SDK (modal@0.11.1) pointed at it;
 * cleanup closes the provider's client and the server (which kills every sandbox process).
 */
export async function modalFixture(options: ModalProviderOptions = {}, serverOptions: ModalServerOptions = {}): Promise<ModalFixture> {
  const server = await startModalServer(serverOptions);
  const execsAtTaskEnd = serverOptions.router?.execsAtTaskEnd ?? DEFAULT_ROUTER_BEHAVIOUR.execsAtTaskEnd;
  const provider = new ModalProvider(server.client(), {
    appName: 'lanes-test',
    // Sandboxes share the host filesystem; keep the lanes workdir inside the server's temp dir.
    workdir: join(server.rootDir, 'work'),
    livenessPollIntervalMs: MODAL_TEST_LIVENESS_POLL_MS,
    backstopMarginMs: 2_000,
    outputDrainMs: 500,
    connectTimeoutMs: 10_000,
    ownsClient: true,
    ...options,
  });
  return {
    provider,
    server,
    spec: modalTestSpec(),
    killGraceMs: MODAL_TEST_KILL_GRACE_MS,
    liveHostPids: (envEntry) => findByEnvEntry(envEntry, new Set([process.pid])).map((p) => p.pid),
    // The container dies from the outside (host loss, OOM): Modal then reports it finished.
    killRoot: async (handle) => server.killSandbox(handle.id),
    // The router reports the container's SIGKILL as the running command's status (128 + 9), unless
    // the liveness poll raced to the death first (modal-task-end pins the form down).
    commandEndsOnDeath: execsAtTaskEnd === 'exit-137' ? [137, 'gone'] : ['gone'],
    cleanup: async () => {
      await provider.close();
      await server.close();
    },
  };
}
