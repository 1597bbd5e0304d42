import { statSync } from 'node:fs';
import { dirname, isAbsolute } from 'node:path';
import type { LaneConfig, LaneIsolation } from '@lanes/contracts';
import { isolatesAgents } from './isolation.js';
import type { SeparateUidProbe } from './separate-uid.js';

export type { LaneIsolation };

/** What the machine allows, found once (detectIsolation, probeSeparateUid). */
export interface IsolationCapabilities {
  pidNamespace: boolean;
  separateUid: SeparateUidProbe;
}

/**
 * The lane's isolation. `auto` takes the strongest the machine allows that can run the lane's
 * agent: an agent uid must be able to read the programs and files its commands name, so a lane
 * whose agent lies where only root may look runs in the PID namespace instead, and says why. An
 * explicit setting is kept as given (an explicit `separate-uid` the machine cannot do is refused
 * when its first sandbox is made, naming why).
 * `unreadable` names the first path of the lane's commands another user cannot read, if any.
 */
export function resolveLaneIsolation(lane: Pick<LaneConfig, 'provider' | 'isolation'>, machine: IsolationCapabilities, unreadable: string | undefined): LaneIsolation {
  if (lane.provider === 'modal') return { mode: 'modal', trustedAgentsOnly: false };
  const weaker = (why: string): LaneIsolation =>
    machine.pidNamespace ? { mode: 'pid-namespace', trustedAgentsOnly: true, why } : { mode: 'process-group', trustedAgentsOnly: true, why };
  switch (lane.isolation) {
    case 'auto':
      if (!machine.pidNamespace) return weaker('this machine does not allow a PID namespace (unshare --pid)');
      if (!machine.separateUid.ok) return weaker(machine.separateUid.why);
      if (unreadable) return weaker(`${unreadable} is not readable by other users, so an agent uid could not run the lane's commands`);
      return { mode: 'separate-uid', trustedAgentsOnly: false };
    case 'separate-uid':
      return { mode: 'separate-uid', trustedAgentsOnly: false, ...(unreadable ? { why: `${unreadable} is not readable by other users: the lane's commands will fail` } : {}) };
    case 'pid-namespace':
    case 'process-group':
      return { mode: lane.isolation, trustedAgentsOnly: !isolatesAgents(lane.isolation), why: 'set by the lane' };
  }
}

/**
 * The first absolute path named in the lane's commands that exists and that another user cannot
 * reach (a directory above it without o+x) or read (no o+r). Paths that do not exist yet are left
 * to the command.
 */
export function firstUnreadablePath(lane: Pick<LaneConfig, 'agent' | 'setup'>): string | undefined {
  for (const argv of [lane.agent, ...lane.setup]) {
    for (const arg of argv) {
      if (!isAbsolute(arg)) continue;
      const mode = statSync(arg, { throwIfNoEntry: false })?.mode;
      if (mode === undefined) continue;
      if ((mode & 0o004) === 0) return arg;
      for (let dir = dirname(arg); ; dir = dirname(dir)) {
        const dirMode = statSync(dir, { throwIfNoEntry: false })?.mode;
        if (dirMode !== undefined && (dirMode & 0o001) === 0) return dir;
        if (dirname(dir) === dir) break;
      }
    }
  }
  return undefined;
}
