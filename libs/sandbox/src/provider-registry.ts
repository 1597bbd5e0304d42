import type { Logger } from 'pino';
import type { LaneConfig } from '@lanes/contracts';
import { createFaultyProvider } from './faulty-provider.js';
import { createLocalProvider } from './local/local-provider.js';
import { createModalProvider } from './modal/modal-provider.js';
import type { SandboxProvider } from './provider.js';

export interface ProviderRegistryOptions {
  /** Local sandboxes live here; share it with the supervisor so it can reap by id. */
  sandboxDir: string;
  env: NodeJS.ProcessEnv;
  log?: Logger;
}

export interface ProviderRegistry {
  /** The provider a lane's slots create sandboxes with: one shared instance per kind, wrapped per lane when it has `faults`. */
  forLane(lane: LaneConfig): SandboxProvider;
  /** The underlying providers the given lanes use, for orphan reaping (never the faulty wrappers). */
  all(lanes: readonly LaneConfig[]): SandboxProvider[];
}

/** Credentials of lanes itself never reach an agent: the sandbox env starts without them. */
const CONTROL_PLANE_ENV = /^(REDIS_URL|LANES_API_TOKENS?|LANES_CONFIG|MODAL_TOKEN_ID|MODAL_TOKEN_SECRET|NODE_OPTIONS)$/;

export function agentBaseEnv(env: NodeJS.ProcessEnv): Record<string, string | undefined> {
  return Object.fromEntries(Object.entries(env).filter(([k]) => !CONTROL_PLANE_ENV.test(k)));
}

/** Builds providers on first use, so a process with only local lanes never needs Modal credentials. */
export function createProviderRegistry(options: ProviderRegistryOptions): ProviderRegistry {
  const onCleanupError = (label: string, err: unknown) => options.log?.warn({ err, op: label }, `${label} failed`);
  let local: SandboxProvider | undefined;
  let modal: SandboxProvider | undefined;
  const faulty = new Map<string, SandboxProvider>();
  const base = (kind: LaneConfig['provider']): SandboxProvider => {
    switch (kind) {
      case 'local':
        return (local ??= createLocalProvider({ baseDir: options.sandboxDir, baseEnv: agentBaseEnv(process.env), deps: { onCleanupError } }));
      case 'modal':
        return (modal ??= createModalProvider({ env: options.env }));
    }
  };
  return {
    forLane(lane) {
      if (!lane.faults) return base(lane.provider);
      let wrapped = faulty.get(lane.name);
      if (!wrapped) faulty.set(lane.name, (wrapped = createFaultyProvider(base(lane.provider), lane.faults)));
      return wrapped;
    },
    all(lanes) {
      return [...new Set(lanes.map((l) => base(l.provider)))];
    },
  };
}
