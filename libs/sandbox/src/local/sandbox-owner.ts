import { isAlive, readStat } from '../proc.js';
import { sandboxMembers } from '../sandbox-reaper.js';
import type { SandboxRecord } from './sandbox-registry.js';

/** The creating process as a record names it: pid paired with its start time, so a recycled pid never passes for it. */
export function ownerOf(pid: number): Pick<SandboxRecord, 'ownerPid' | 'ownerStartTime'> {
  const stat = readStat(pid);
  return stat ? { ownerPid: pid, ownerStartTime: stat.startTime } : {};
}

/** Whether the creator still runs (same host); undefined when the record does not name it. */
export function ownerAlive(r: SandboxRecord): boolean | undefined {
  if (r.ownerPid === undefined || r.ownerStartTime === undefined) return undefined;
  return isAlive(r.ownerPid, r.ownerStartTime);
}

/**
 * A sandbox that ended with its creator: its creator is gone and no process of it is left. Local
 * sandboxes live on this host, so the creator's pid is checked here directly. A record without an
 * owner (written before owners were recorded) is never judged ended this way.
 */
export function endedWithOwner(r: SandboxRecord): boolean {
  return ownerAlive(r) === false && sandboxMembers(r.id).length === 0;
}
