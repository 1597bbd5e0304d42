import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** The path the SDK execs for every filesystem operation (SANDBOX_FS_TOOLS_PATH in the SDK). */
export const SDK_FS_TOOLS_PATH = '/__modal/.bin/modal-sandbox-fs-tools';
/** Our stand-in for that helper: a real process speaking the SDK's JSON command / stderr protocol. */
const FS_TOOLS_SCRIPT = fileURLToPath(new URL('./fs-tools.mjs', import.meta.url));

/** How an exec ended, as TaskExecWait reports it: an exit code, or the signal that killed it. */
export type ExecExit = { code: number } | { signal: number };

const SIGNAL_NUMBERS: Readonly<Record<string, number>> = {
  SIGHUP: 1,
  SIGINT: 2,
  SIGQUIT: 3,
  SIGABRT: 6,
  SIGKILL: 9,
  SIGUSR1: 10,
  SIGSEGV: 11,
  SIGUSR2: 12,
  SIGPIPE: 13,
  SIGALRM: 14,
  SIGTERM: 15,
};

export interface ExecSpawnSpec {
  execId: string;
  argv: readonly string[];
  cwd: string;
  env: Record<string, string>;
  /** The exec's server-side timeout (TaskExecStartRequest.timeoutSecs); the exec's group is SIGKILLed after it. */
  timeoutMs?: number;
}

/**
 * One exec'd command inside a local sandbox: a real process in its own process group whose stdout
 * and stderr are kept whole, so TaskExecStdioRead can serve any offset (the SDK resumes a broken
 * stream from the offset it reached) and output can be read after the exit, as the SDK's
 * filesystem helpers do.
 */
export class ServerExec {
  readonly execId: string;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly timeoutMs: number | undefined;
  readonly child: ChildProcess;
  readonly output: [Buffer[], Buffer[]] = [[], []];
  readonly outputBytes: [number, number] = [0, 0];
  /** Set when a stream has reached EOF (both closed and exited → the stdio read stream ends). */
  readonly outputClosed: [boolean, boolean] = [false, false];
  exit: ExecExit | undefined;
  /** Wall-clock start and end (ms), so tests can order execs ("stopped before the next started"). */
  readonly startedAt = Date.now();
  endedAt: number | undefined;
  /** Ended because its sandbox's task ended under it (killed with the container), not by itself. */
  endedWithTask = false;
  stdinBytesWritten = 0;
  stdinClosed = false;
  readonly #listeners = new Set<() => void>();
  #backstop: NodeJS.Timeout | undefined;

  constructor(spec: ExecSpawnSpec) {
    this.execId = spec.execId;
    this.argv = [...spec.argv];
    this.cwd = spec.cwd;
    this.timeoutMs = spec.timeoutMs;
    const [file, ...args] = spec.argv[0] === SDK_FS_TOOLS_PATH ? [process.execPath, FS_TOOLS_SCRIPT, ...spec.argv.slice(1)] : spec.argv;
    // detached: the exec leads its own process group, so a timeout or a dying sandbox reaches its children.
    this.child = spawn(file ?? '', args, { cwd: spec.cwd, env: spec.env, stdio: ['pipe', 'pipe', 'pipe'], detached: true });
    this.child.stdin?.on('error', () => {
      // The command exited without reading its stdin: not the writer's problem.
    });
    for (const fd of [0, 1] as const) {
      const stream = fd === 0 ? this.child.stdout : this.child.stderr;
      stream?.on('data', (chunk: Buffer) => this.#append(fd, chunk));
      stream?.once('close', () => {
        this.outputClosed[fd] = true;
        this.#notify();
      });
    }
    let spawnError: Error | undefined;
    this.child.once('error', (err) => {
      // A command that cannot start exits 127 with the reason on stderr, as a shell in a container would.
      spawnError = err;
      this.#append(1, Buffer.from(`${err.message}\n`));
      this.outputClosed[0] = true;
      this.outputClosed[1] = true;
      this.#finish({ code: 127 });
    });
    this.child.once('exit', (code, signal) => {
      if (spawnError) return;
      this.#finish(signal ? { signal: SIGNAL_NUMBERS[signal] ?? 9 } : { code: code ?? 0 });
    });
    if (spec.timeoutMs !== undefined) {
      this.#backstop = setTimeout(() => this.killGroup('SIGKILL'), spec.timeoutMs);
      this.#backstop.unref();
    }
  }

  get pid(): number | undefined {
    return this.child.pid;
  }

  get running(): boolean {
    return this.exit === undefined;
  }

  /** Signals the exec's whole process group (the exec's own timeout, or the sandbox dying). */
  killGroup(signal: NodeJS.Signals): void {
    if (this.child.pid === undefined) return;
    try {
      process.kill(-this.child.pid, signal);
    } catch {
      // already gone
    }
  }

  /**
   * The task ends under a running command: the container's SIGKILL ends it (the sandbox reaps its
   * processes), and it is reported so at once, as the router saw it, whatever its process does next.
   */
  endWithTask(): void {
    if (this.exit) return;
    this.endedWithTask = true;
    this.#finish({ signal: 9 }); // SIGKILL
  }

  writeStdin(data: Uint8Array): void {
    if (this.stdinClosed) return;
    this.stdinBytesWritten += data.length;
    this.child.stdin?.write(data);
  }

  closeStdin(): void {
    if (this.stdinClosed) return;
    this.stdinClosed = true;
    this.child.stdin?.end();
  }

  /** Resolves on the next change (output, EOF, exit), or when `signal` aborts. */
  changed(signal?: AbortSignal): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = (): void => {
        this.#listeners.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      this.#listeners.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }

  /** Output of `fd` (0 stdout, 1 stderr) from byte `offset` on. */
  outputFrom(fd: 0 | 1, offset: number): Buffer {
    return Buffer.concat(this.output[fd]).subarray(offset);
  }

  #append(fd: 0 | 1, chunk: Buffer): void {
    this.output[fd].push(chunk);
    this.outputBytes[fd] += chunk.length;
    this.#notify();
  }

  #finish(exit: ExecExit): void {
    if (this.exit) return;
    this.exit = exit;
    this.endedAt = Date.now();
    clearTimeout(this.#backstop);
    this.#notify();
  }

  /** Wakes every waiter; used by the sandbox too when it dies. */
  notify(): void {
    this.#notify();
  }

  #notify(): void {
    for (const listener of [...this.#listeners]) listener();
  }
}
