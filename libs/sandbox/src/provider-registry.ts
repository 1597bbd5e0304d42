import type { Logger } from 'pino';
import { ProviderInvalidError, type LaneConfig } from '@lanes/contracts';
import { detectIsolation, type IsolationMode } from './local/isolation.js';
import { firstUnreadablePath, resolveLaneIsolation, type IsolationCapabilities, type LaneIsolation } from './local/lane-isolation.js';
import { probeSeparateUid } from './local/separate-uid.js';
import { agentBaseEnv } from './agent-env.js';
import { createFaultyProvider } from './faulty-provider.js';
import { createLocalProvider } from './local/local-provider.js';
import type { SandboxProvider } from './provider.js';

export interface ProviderRegistryOptions {
  /** Local sandboxes live here; share it with the supervisor so it can reap by id. */
  sandboxDir: string;
  env: NodeJS.ProcessEnv;
  log?: Logger;
  /** The lanes it builds providers for: the Modal SDK is loaded only when one of them runs on Modal. */
  lanes: readonly LaneConfig[];
}

export interface ProviderRegistry {
  /** The provider a lane's slots create sandboxes with: one shared instance per kind, wrapped per lane when it has `faults`. */
  forLane(lane: LaneConfig): SandboxProvider;
  /** The underlying providers the given lanes use, for orphan reaping (never the faulty wrappers). */
  all(lanes: readonly LaneConfig[]): SandboxProvider[];
  /** How the lane's agents are fenced (resolveLaneIsolation), decided once per lane. */
  isolation(lane: LaneConfig): LaneIsolation;
}

/**
 * Builds providers on first use, so a process with only local lanes never needs Modal credentials,
 * nor loads the Modal SDK: a tenth of a second of every local worker's start (bench/worker-boot.ts).
 */
export async function createProviderRegistry(options: ProviderRegistryOptions): Promise<ProviderRegistry> {
  const createModal = options.lanes.some((l) => l.provider === 'modal') ? (await import('./modal/modal-provider.js')).createModalProvider : undefined;
  const onCleanupError = (label: string, err: unknown) => options.log?.warn({ err, op: label }, `${label} failed`);
  const local = new Map<IsolationMode, SandboxProvider>();
  const isolations = new Map<string, LaneIsolation>();
  let machine: IsolationCapabilities | undefined;
  const isolation = (lane: LaneConfig): LaneIsolation => {
    let found = isolations.get(lane.name);
    if (!found) {
      machine ??= { pidNamespace: detectIsolation() === 'pid-namespace', separateUid: probeSeparateUid(options.sandboxDir) };
      found = resolveLaneIsolation(lane, machine, lane.provider === 'local' ? firstUnreadablePath(lane) : undefined);
      isolations.set(lane.name, found);
    }
    return found;
  };
  let modal: SandboxProvider | undefined;
  const faulty = new Map<string, SandboxProvider>();
  const base = (lane: LaneConfig): SandboxProvider => {
    switch (lane.provider) {
      case 'local': {
        const mode = isolation(lane).mode as IsolationMode;
        let made = local.get(mode);
        if (!made) {
          made = createLocalProvider({ baseDir: options.sandboxDir, isolation: mode, baseEnv: agentBaseEnv(options.env), secretEnv: options.env, deps: { onCleanupError } });
          local.set(mode, made);
        }
        return made;
      }
      case 'modal':
        if (!createModal) throw new ProviderInvalidError('modal', `lane ${lane.name} is not one of the lanes this provider registry was made for`);
        return (modal ??= createModal({ env: options.env }));
    }
  };
  return {
    forLane(lane) {
      if (!lane.faults) return base(lane);
      let wrapped = faulty.get(lane.name);
      if (!wrapped) faulty.set(lane.name, (wrapped = createFaultyProvider(base(lane), lane.faults)));
      return wrapped;
    },
    all(lanes) {
      return [...new Set(lanes.map((l) => base(l)))];
    },
    isolation,
  };
}
