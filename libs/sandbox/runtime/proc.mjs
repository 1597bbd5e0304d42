// Read-only views of /proc, shared by the sandbox init (plain node, no build step) and the host
// side of the local provider. Plain ESM on purpose: the init must start with bare `node`.
import { readFileSync, readdirSync } from 'node:fs';

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
  // fields[0] is stat field 3 (state); ppid, pgrp are fields 4 and 5; starttime is field 22.
  return {
    pid,
    state: fields[0] ?? '?',
    ppid: Number(fields[1]),
    pgrp: Number(fields[2]),
    startTime: Number(fields[19]),
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
 * Whether the process's initial environment holds exactly `entry` ("KEY=value"). Children inherit
 * the environment, so this finds members that left the process group and lost their parent.
 * @param {number} pid
 * @param {string} entry
 */
export function hasEnvEntry(pid, entry) {
  let env;
  try {
    env = readFileSync(`/proc/${pid}/environ`);
  } catch {
    return false;
  }
  const needle = Buffer.from(`${entry}\0`, 'latin1');
  let at = env.indexOf(needle);
  while (at !== -1) {
    if (at === 0 || env[at - 1] === 0) return true;
    at = env.indexOf(needle, at + 1);
  }
  return false;
}

/**
 * Running processes whose environment carries `entry`, except `exclude`.
 * @param {string} entry
 * @param {ReadonlySet<number>} [exclude]
 */
export function findByEnvEntry(entry, exclude) {
  // The environment is read first and the stat only of a match: a scan reads one file per host
  // process, not two (it runs on every reap, over every process of the host).
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
    const pid = Number(name);
    if (exclude?.has(pid) || !hasEnvEntry(pid, entry)) continue;
    const stat = readStat(pid);
    if (stat && isRunningState(stat.state)) out.push(stat);
  }
  return out;
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
