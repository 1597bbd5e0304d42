// Read-only views of /proc, shared by the sandbox init (plain node, no build step) and the host
// side of the local provider. Plain ESM on purpose: the init must start with bare `node`.
import { readFileSync, readdirSync } from 'node:fs';

/** PF_KTHREAD in /proc/<pid>/stat's flags: a kernel thread, which has no environment to read. */
const PF_KTHREAD = 0x00200000;
/**
 * How long a process whose environment cannot be read is read again before a scan takes it for a
 * non-member. The kernel's windows (exec between the new image and its environment, exit after the
 * memory is gone) last microseconds; a process that stays unreadable this long has no environment.
 */
export const UNREADABLE_SETTLE_MS = 200;

/**
 * Parses /proc/<pid>/stat. The command name sits in parentheses and may itself contain spaces or
 * ')', so fields are split after the LAST ')'.
 * @param {number} pid
 * @returns {import('./proc.d.mts').ProcStat | undefined}
 */
export function readStat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'latin1');
  } catch {
    return undefined;
  }
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  // fields[0] is stat field 3 (state); ppid, pgrp are fields 4 and 5; flags is field 9; starttime is field 22.
  return {
    pid,
    state: fields[0] ?? '?',
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTime: Number(fields[19]),
    kernelThread: (Number(fields[6]) & PF_KTHREAD) !== 0,
  };
}

/** Zombies (Z) and dead (X) entries hold no resources a kill could free, so they are not "alive". */
export function isRunningState(state) {
  return state !== 'Z' && state !== 'X';
}

/**
 * Alive and, when `startTime` is given, still the same process: guards against a recycled pid.
 * @param {number} pid
 * @param {number} [startTime]
 */
export function isAlive(pid, startTime) {
  const stat = readStat(pid);
  if (!stat || !isRunningState(stat.state)) return false;
  return startTime === undefined || stat.startTime === startTime;
}

/** Every process visible in this /proc (the whole host, or only the PID namespace inside a sandbox). */
export function scanProcesses() {
  /** @type {import('./proc.d.mts').ProcStat[]} */
  const out = [];
  let names;
  try {
    names = readdirSync('/proc');
  } catch {
    return out;
  }
  for (const name of names) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    const stat = readStat(Number(name));
    if (stat) out.push(stat);
  }
  return out;
}

/**
 * What the process's initial environment says of `entry` ("KEY=value"): `match` when it holds it
 * exactly, `other` when it does not or cannot be ours (gone, or not ours to read), and `unreadable`
 * when it reads empty or its memory is gone (ESRCH). The kernel shows a live process that way
 * between exec installing a new image and the loader placing its environment, and while an exit
 * tears its memory down, so `unreadable` means "read again", never "not a member".
 * Children inherit the environment, so a match finds members that left the process group and lost their parent.
 * @param {number} pid
 * @param {string} entry
 * @returns {'match' | 'other' | 'unreadable'}
 */
export function readEnvEntry(pid, entry) {
  let env;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch (error) {
    return /** @type {NodeJS.ErrnoException} */ (error).code === 'ESRCH' ? 'unreadable' : 'other';
  }
  if (env.length === 0) return 'unreadable';
  const needle = Buffer.from(`${entry}\0`, 'latin1');
  let at = env.indexOf(needle);
  while (at !== -1) {
    if (at === 0 || env[at - 1] === 0) return 'match';
    at = env.indexOf(needle, at + 1);
  }
  return 'other';
}

/**
 * Whether the process's initial environment holds exactly `entry` ("KEY=value") now.
 * @param {number} pid
 * @param {string} entry
 */
export function hasEnvEntry(pid, entry) {
  return readEnvEntry(pid, entry) === 'match';
}

/**
 * Running processes whose environment carries `entry` (`members`), and running processes, born at
 * or after `bornSince` (clock ticks) when given, whose environment could not be read (`unreadable`):
 * a scan cannot tell whether those are members yet. Kernel threads never are.
 * @param {string} entry
 * @param {ReadonlySet<number>} [exclude]
 * @param {number} [bornSince]
 */
export function scanEnvEntry(entry, exclude, bornSince) {
  // The environment is read first and the stat only of a match or an unreadable one: a scan reads
  // one file per host process, not two (it runs on every reap, over every process of the host).
  /** @type {import('./proc.d.mts').ProcStat[]} */
  const members = [];
  /** @type {import('./proc.d.mts').ProcStat[]} */
  const unreadable = [];
  let names;
  try {
    names = readdirSync('/proc');
  } catch {
    return { members, unreadable };
  }
  for (const name of names) {
    const code = name.charCodeAt(0);
    if (code < 48 || code > 57) continue;
    const pid = Number(name);
    if (exclude?.has(pid)) continue;
    const found = readEnvEntry(pid, entry);
    if (found === 'other') continue;
    const stat = readStat(pid);
    if (!stat || !isRunningState(stat.state)) continue;
    if (found === 'match') members.push(stat);
    else if (mayBeMember(stat, bornSince)) unreadable.push(stat);
  }
  return { members, unreadable };
}

/**
 * Whether a running process whose environment could not be read may be a member: not a kernel
 * thread, and born at or after `bornSince` (clock ticks; members are born after their root) when given.
 * @param {import('./proc.d.mts').ProcStat} stat
 * @param {number} [bornSince]
 */
export function mayBeMember(stat, bornSince) {
  return !stat.kernelThread && (bornSince === undefined || stat.startTime >= bornSince);
}

/**
 * Running processes whose environment carries `entry`, except `exclude`.
 * @param {string} entry
 * @param {ReadonlySet<number>} [exclude]
 */
export function findByEnvEntry(entry, exclude) {
  return scanEnvEntry(entry, exclude).members;
}

/**
 * Which unreadable processes a scan still waits for: each is remembered from the scan that first
 * found it unreadable (`since`, keyed by pid and start time, so a recycled pid starts afresh) and
 * waited for until `settleMs` have passed. Pure: returns the next `since` and how many still settle.
 * @param {ReadonlyMap<string, number>} since
 * @param {readonly import('./proc.d.mts').ProcStat[]} unreadable
 * @param {number} nowMs
 * @param {number} settleMs
 * @returns {{ since: Map<string, number>; settling: number }}
 */
export function settleUnreadable(since, unreadable, nowMs, settleMs) {
  const next = new Map();
  let settling = 0;
  for (const p of unreadable) {
    const key = `${p.pid}/${p.startTime}`;
    const first = since.get(key) ?? nowMs;
    next.set(key, first);
    if (nowMs - first < settleMs) settling++;
  }
  return { since: next, settling };
}

/**
 * A scan's memory of the processes it could not read (settleUnreadable): `settling(unreadable)`
 * records this scan's and answers how many a scan must still wait for.
 * @param {number} settleMs
 * @param {() => number} [now]
 */
export function unreadableTracker(settleMs, now = Date.now) {
  let since = new Map();
  return {
    /** @param {readonly import('./proc.d.mts').ProcStat[]} unreadable */
    settling(unreadable) {
      const answer = settleUnreadable(since, unreadable, now(), settleMs);
      since = answer.since;
      return answer.settling;
    },
  };
}

/**
 * Direct children of `pid`. Uses /proc/<pid>/task/<pid>/children when the kernel has it, else a scan.
 * @param {number} pid
 * @returns {number[]}
 */
export function childrenOf(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/task/${pid}/children`, 'latin1').trim();
    return text === '' ? [] : text.split(' ').map(Number);
  } catch {
    return scanProcesses()
      .filter((p) => p.ppid === pid)
      .map((p) => p.pid);
  }
}
