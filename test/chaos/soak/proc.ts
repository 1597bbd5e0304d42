import { readdirSync, readFileSync, readlinkSync } from 'node:fs';

/** A process's start time in clock ticks since boot (/proc/<pid>/stat field 22): with the pid, it names one process for good. */
export function procStartTime(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) may hold spaces and parentheses; fields after it are plain.
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(rest[19]);
  } catch {
    return undefined;
  }
}

/** Alive and still the same process (not a reused pid), and not a zombie. */
export function isSameProcess(pid: number, startTime: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const rest = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return rest[0] !== 'Z' && Number(rest[19]) === startTime;
  } catch {
    return false;
  }
}

export function exePath(pid: number): string | undefined {
  try {
    return readlinkSync(`/proc/${pid}/exe`);
  } catch {
    return undefined;
  }
}

/** Value of `name` in a process's environment, if readable. */
export function envOf(pid: number, name: string): string | undefined {
  try {
    const vars = readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
    return vars.find((v) => v.startsWith(`${name}=`))?.slice(name.length + 1);
  } catch {
    return undefined;
  }
}

/** Pids of sandbox processes (roots, inits, agents) whose workdir lies under `sandboxDir`: only ours. */
export function sandboxPidsUnder(sandboxDir: string): number[] {
  const out: number[] = [];
  const prefix = sandboxDir.endsWith('/') ? sandboxDir : `${sandboxDir}/`;
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const workdir = envOf(Number(name), 'LANES_SANDBOX_WORKDIR');
    if (workdir?.startsWith(prefix)) out.push(Number(name));
  }
  return out;
}

/** Pids whose environment has `name=value` exactly (e.g. the soak's agents: SOAK_LEDGER=<this run's ledger>). */
export function pidsWithEnv(name: string, value: string): number[] {
  return readdirSync('/proc')
    .filter((n) => /^\d+$/.test(n) && envOf(Number(n), name) === value)
    .map(Number);
}

export function killQuietly(pid: number, signal: NodeJS.Signals = 'SIGKILL'): boolean {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}
