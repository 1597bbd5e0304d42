import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import { procStartTime } from './proc.js';

/** A process the soak started: its real pid (never a wrapper's), its log, and when it lived. */
export interface Managed {
  label: string;
  pid: number;
  startTime: number;
  logPath: string;
  startedAtMs: number;
  /** Set when it has exited (however). */
  endedAtMs?: number;
  exited: Promise<void>;
  child: ChildProcess;
}

export interface SpawnOptions {
  label: string;
  command: string;
  args: string[];
  env: NodeJS.ProcessEnv;
  logPath: string;
  cwd?: string;
  /** Told the pid as soon as it exists, before anything else can go wrong. */
  register: (m: { pid: number; startTime: number; label: string }) => void;
}

/**
 * Spawns detached (its own process group, so a Ctrl-C to the soak does not reach it; the soak
 * stops it itself) with stdout and stderr appended to `logPath`. `ip netns exec` execs its command
 * in place, so the pid of the `ip` we spawn is the pid of the node inside.
 */
export function spawnManaged(o: SpawnOptions): Managed {
  const fd = openSync(o.logPath, 'a');
  let child: ChildProcess;
  try {
    child = spawn(o.command, o.args, { env: o.env, stdio: ['ignore', fd, fd], detached: true, ...(o.cwd ? { cwd: o.cwd } : {}) });
  } finally {
    closeSync(fd);
  }
  if (child.pid === undefined) throw new Error(`could not start ${o.label} (${o.command})`);
  const pid = child.pid;
  const startTime = procStartTime(pid) ?? -1;
  o.register({ pid, startTime, label: o.label });
  const m: Managed = {
    label: o.label,
    pid,
    startTime,
    logPath: o.logPath,
    startedAtMs: Date.now(),
    child,
    exited: new Promise<void>((resolve) => {
      child.once('exit', () => {
        m.endedAtMs = Date.now();
        resolve();
      });
    }),
  };
  child.once('error', () => undefined);
  return m;
}

export const isRunning = (m: Managed) => m.endedAtMs === undefined;

/** Sends `signal` and waits up to `timeoutMs` for the exit; true when it exited. */
export async function signalAndWait(m: Managed, signal: NodeJS.Signals, timeoutMs: number): Promise<boolean> {
  if (!isRunning(m)) return true;
  try {
    process.kill(m.pid, signal);
  } catch {
    // already gone
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<false>((r) => (timer = setTimeout(() => r(false), timeoutMs)));
  const ok = await Promise.race([m.exited.then(() => true as const), timedOut]);
  clearTimeout(timer);
  return ok;
}
