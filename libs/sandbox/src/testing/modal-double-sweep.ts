import { readdirSync, readFileSync } from 'node:fs';

/**
 * Finds every process whose environment carries `NAME=value`. The double marks all processes of a
 * sandbox this way, so killing a sandbox reaches processes that left their group or session, just
 * as a container's death would. (A process that clears its environment escapes; the real thing has
 * no such hole, which is acceptable for a test double.) Linux /proc only; elsewhere returns [].
 */
export function pidsWithEnv(name: string, value: string): number[] {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  const needle = Buffer.from(`${name}=${value}\0`);
  const pids: number[] = [];
  for (const entry of entries) {
    if (!/^\d+$/.test(entry) || Number(entry) === process.pid) continue;
    let environ: Buffer;
    try {
      environ = readFileSync(`/proc/${entry}/environ`);
    } catch {
      continue; // exited meanwhile, or not ours to read
    }
    // Match whole entries only: at the start, or right after a NUL.
    const at = environ.indexOf(needle);
    if (at === 0 || (at > 0 && environ[at - 1] === 0)) pids.push(Number(entry));
  }
  return pids;
}

function signalPid(pid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/**
 * SIGKILLs the given process groups and everything marked with `NAME=value`, rescanning until a
 * scan finds nothing (a process may fork between a scan and its kill). Synchronous so it can also
 * run from a process 'exit' hook.
 */
export function killMarked(name: string, value: string, groups: readonly number[] = []): void {
  for (const pgid of groups) signalPid(-pgid, 'SIGKILL');
  for (let round = 0; round < 50; round++) {
    const pids = pidsWithEnv(name, value);
    if (pids.length === 0) return;
    for (const pid of pids) signalPid(pid, 'SIGKILL');
  }
}
