import { pollUntil } from './deadline.js';
import { UNREADABLE_SETTLE_MS, findByEnvEntry, isAlive, scanEnvEntry, scanProcesses, unreadableTracker } from './proc.js';

/** Every process of a local sandbox inherits `LANES_SANDBOX_ID=<id>` from its root. */
export const SANDBOX_ID_ENV = 'LANES_SANDBOX_ID';
/** Each command additionally carries `LANES_EXEC_ID=<sandbox id>:<n>` (set by the init). */
export const EXEC_ID_ENV = 'LANES_EXEC_ID';
/** SIGKILL is asynchronous; give the kernel this long to tear a sandbox down before reporting survivors. */
export const REAP_TIMEOUT_MS = 5_000;
const REAP_POLL_INTERVAL_MS = 10;
/** While a sandbox's root or namespace init still lives, the host-wide member scan runs at most this often. */
export const REAP_SCAN_INTERVAL_MS = 100;

/**
 * Whether a reap's poll scans the host for the sandbox's members now. The scan reads every host
 * process's environment (milliseconds per scan, on the caller's event loop), and a namespace's
 * members die with its init, so it waits for the root and the init to go; it still runs every
 * `REAP_SCAN_INTERVAL_MS` meanwhile, for members outside a namespace that a stuck root leaves running.
 */
export function reapScanDue(s: { rootAlive: boolean; nsInitAlive: boolean; msSinceScan: number }): boolean {
  return (!s.rootAlive && !s.nsInitAlive) || s.msSinceScan >= REAP_SCAN_INTERVAL_MS;
}

/** What is known about a sandbox to kill; a bare id still finds its processes by their env marker. */
export interface ReapTarget {
  id: string;
  rootPid?: number;
  rootStartTime?: number;
  nsInitPid?: number;
  nsInitStartTime?: number;
}

/** How long a reap polls, and how long it reads again a process it could not read (see `scanEnvEntry`). */
export interface ReapLimits {
  timeoutMs: number;
  unreadableSettleMs: number;
}
const DEFAULT_REAP_LIMITS: ReapLimits = { timeoutMs: REAP_TIMEOUT_MS, unreadableSettleMs: UNREADABLE_SETTLE_MS };

/** Running processes that belong to sandbox `id`, wherever they are (found by the inherited env marker). */
export function sandboxMembers(id: string): number[] {
  return findByEnvEntry(`${SANDBOX_ID_ENV}=${id}`, new Set([process.pid])).map((p) => p.pid);
}

/**
 * SIGKILLs a sandbox: its root (and so, in a namespace, everything inside), then every process that
 * still carries its marker — in a plain process group, commands live in their own groups and would
 * otherwise outlive the root. `groups` are command process groups the host knows of; each is only
 * signalled while it still holds a process of this sandbox, so a recycled pgid is never hit.
 * A scan that cannot read a process born since the root (mid-exec, say) is not final: the process
 * is read again until it shows whether it is a member, or for `unreadableSettleMs`.
 * Resolves with the pids still running at the deadline (normally none).
 */
export async function reapSandbox(target: ReapTarget, groups: Iterable<number> = [], limits: ReapLimits = DEFAULT_REAP_LIMITS): Promise<number[]> {
  // A pid without its start time is never signalled: it may have been recycled.
  const rootAlive = (): boolean => target.rootPid !== undefined && target.rootStartTime !== undefined && isAlive(target.rootPid, target.rootStartTime);
  if (rootAlive() && target.rootPid !== undefined) {
    // The root was spawned detached, so it leads its own group (unshare + sh + init, or the init).
    signal(-target.rootPid, 'SIGKILL');
    signal(target.rootPid, 'SIGKILL');
  }
  const nsInitAlive = (): boolean => target.nsInitPid !== undefined && target.nsInitStartTime !== undefined && isAlive(target.nsInitPid, target.nsInitStartTime);
  // Normally PDEATHSIG does this; killing pid 1 directly does not depend on its timing.
  if (nsInitAlive() && target.nsInitPid !== undefined) signal(target.nsInitPid, 'SIGKILL');
  killGroupsStillOurs(target.id, groups);

  let survivors: number[] = [];
  const unreadable = unreadableTracker(limits.unreadableSettleMs);
  let settling = 0;
  // The reap's start counts as a scan's time: the first scan waits for the root, or for the interval.
  let scannedAt = Date.now();
  const scan = (): void => {
    scannedAt = Date.now();
    // Members are born after the root; with its start time unknown, any unreadable process may be one.
    const found = scanEnvEntry(`${SANDBOX_ID_ENV}=${target.id}`, new Set([process.pid]), target.rootStartTime);
    survivors = found.members.map((p) => p.pid);
    for (const pid of survivors) signal(pid, 'SIGKILL');
    settling = unreadable.settling(found.unreadable);
  };
  const done = await pollUntil(
    () => {
      const state = { rootAlive: rootAlive(), nsInitAlive: nsInitAlive() };
      if (!reapScanDue({ ...state, msSinceScan: Date.now() - scannedAt })) return false;
      scan();
      return !state.rootAlive && !state.nsInitAlive && survivors.length === 0 && settling === 0;
    },
    limits.timeoutMs,
    REAP_POLL_INTERVAL_MS,
  );
  if (done) return [];
  scan();
  return survivors;
}

function killGroupsStillOurs(id: string, groups: Iterable<number>): void {
  const wanted = new Set(groups);
  if (wanted.size === 0) return;
  const marker = `${SANDBOX_ID_ENV}=${id}`;
  const ours = new Set(findByEnvEntry(marker).map((p) => p.pid));
  for (const p of scanProcesses()) {
    if (wanted.has(p.pgrp) && ours.has(p.pid)) {
      signal(-p.pgrp, 'SIGKILL');
      wanted.delete(p.pgrp);
    }
  }
}

function signal(pid: number, name: NodeJS.Signals): void {
  try {
    process.kill(pid, name);
  } catch {
    // ESRCH: already gone.
  }
}
