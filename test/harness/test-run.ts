import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';

/**
 * Marks everything one test run starts. globalSetup puts it into the environment before vitest forks
 * its workers, so every redis-server, worker process and sandbox a suite spawns inherits it; a stack
 * started outside the run (a developer's `lanes up`, another engineer's tests) has none or another.
 */
export const TEST_RUN_ENV = 'LANES_TEST_RUN_ID';

export function newTestRunId(): string {
  return `run-${process.pid}-${randomBytes(6).toString('hex')}`;
}

export interface RunProcess {
  pid: number;
  kind: 'sandbox' | 'redis-server' | 'lanes';
}

/**
 * Processes of run `runId` that must not outlive it: sandbox processes (they carry LANES_SANDBOX_ID),
 * harness redis-servers and `lanes` CLI processes. Only a process whose own environment carries this
 * run's id qualifies, so nothing started outside the run is ever listed.
 */
export function runProcesses(runId: string): RunProcess[] {
  const marker = `${TEST_RUN_ENV}=${runId}`;
  const found: RunProcess[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const pid = Number(name);
    if (pid === process.pid || isZombie(pid)) continue;
    const env = environ(pid);
    if (!env.includes(marker)) continue;
    const kind = kindOf(pid, env);
    if (kind) found.push({ pid, kind });
  }
  return found;
}

function kindOf(pid: number, env: readonly string[]): RunProcess['kind'] | undefined {
  if (env.some((v) => v.startsWith('LANES_SANDBOX_ID='))) return 'sandbox';
  const argv = cmdline(pid);
  if (argv[0]?.endsWith('redis-server') || readComm(pid) === 'redis-server') return 'redis-server';
  if (argv.some((a) => a.endsWith('apps/cli/bin/lanes.js'))) return 'lanes';
  return undefined;
}

/** The process's initial environment; the harness stays free of package imports (globalSetup loads it bare). */
function environ(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/environ`, 'latin1').split('\0');
  } catch {
    return []; // gone, or not ours to read
  }
}

function isZombie(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
    return stat.slice(stat.lastIndexOf(')') + 2)[0] === 'Z';
  } catch {
    return true;
  }
}

function cmdline(pid: number): string[] {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0');
  } catch {
    return [];
  }
}

function readComm(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/comm`, 'latin1').trim();
  } catch {
    return '';
  }
}

/** The leak guard's sweep: SIGKILLs what run `runId` left running and returns it. */
export function reapRun(runId: string): RunProcess[] {
  const leaked = runProcesses(runId);
  for (const { pid } of leaked) {
    try {
      process.kill(pid, 'SIGKILL');
    } catch {
      // already gone
    }
  }
  return leaked;
}
