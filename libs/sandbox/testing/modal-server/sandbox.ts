import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { reapSandbox, SANDBOX_ID_ENV } from '../../src/sandbox-reaper.js';
import { ServerExec, type ExecSpawnSpec } from './exec-process.js';

/** The test harness marks every process of one test run with this (test/harness/test-run.ts). */
const TEST_RUN_ENV = 'LANES_TEST_RUN_ID';

/** GenericResult.status values the SDK reads (getReturnCode: TERMINATED → 137, TIMEOUT → 124, else exitcode). */
export const GENERIC_STATUS = { SUCCESS: 1, FAILURE: 2, TERMINATED: 3, TIMEOUT: 4 } as const;

export interface SandboxResult {
  status: number;
  exitcode: number;
  exception: string;
}

export interface ServerSandboxInit {
  id: string;
  taskId: string;
  appId: string;
  imageId: string;
  /** The sandbox's private root directory on the host (its HOME and TMPDIR live here). */
  dir: string;
  env: Record<string, string>;
  tags: Record<string, string>;
  volumes: Record<string, string>;
  workdir: string | undefined;
  lifetimeMs: number;
  /** Seconds since the epoch; unique per server (SandboxListV2 pages by it). */
  createdAt: number;
}

/**
 * A sandbox of the local Modal server: a root process (Modal's default entrypoint sleeps until the
 * sandbox ends) plus every exec'd command, all real local processes marked with LANES_SANDBOX_ID
 * (so the test leak guard sees them). When it finishes — terminate, lifetime, or a test killing it —
 * every process it ever started is SIGKILLed, wherever it moved to.
 */
export class ServerSandbox {
  readonly id: string;
  readonly taskId: string;
  readonly appId: string;
  readonly imageId: string;
  readonly dir: string;
  readonly env: Record<string, string>;
  readonly volumes: Record<string, string>;
  readonly workdir: string | undefined;
  readonly lifetimeMs: number;
  readonly createdAt: number;
  tags: Record<string, string>;
  result: SandboxResult | undefined;
  readonly execs = new Map<string, ServerExec>();
  readonly root: ChildProcess;
  /** Settles when every process of the sandbox is gone after it finished. */
  reaped: Promise<void> = Promise.resolve();
  readonly #lifetime: NodeJS.Timeout;
  readonly #waiters = new Set<() => void>();

  constructor(init: ServerSandboxInit) {
    this.id = init.id;
    this.taskId = init.taskId;
    this.appId = init.appId;
    this.imageId = init.imageId;
    this.dir = init.dir;
    this.volumes = { ...init.volumes };
    this.workdir = init.workdir;
    this.lifetimeMs = init.lifetimeMs;
    this.createdAt = init.createdAt;
    this.tags = { ...init.tags };
    const tmp = join(init.dir, 'tmp');
    mkdirSync(tmp, { recursive: true });
    this.env = {
      PATH: process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin',
      HOME: init.dir,
      TMPDIR: tmp,
      ...init.env,
      // A Modal container does not inherit the host's environment, but the test run's marker must
      // reach every process so the harness's leak guard can tell this run's leftovers.
      ...(process.env[TEST_RUN_ENV] ? { [TEST_RUN_ENV]: process.env[TEST_RUN_ENV] } : {}),
      [SANDBOX_ID_ENV]: init.id,
      LANES_SANDBOX_WORKDIR: init.dir,
    };
    // Modal runs its default entrypoint itself: the image's PATH (the sandbox env) does not decide whether it starts.
    const hostPath = process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin';
    this.root = spawn('sleep', ['infinity'], { cwd: init.dir, env: { ...this.env, PATH: hostPath }, stdio: 'ignore', detached: true });
    this.root.unref();
    this.root.once('exit', (code, signal) => this.finish({ status: GENERIC_STATUS.FAILURE, exitcode: code ?? (signal ? 137 : 0), exception: 'entrypoint exited' }));
    this.root.once('error', () => this.finish({ status: GENERIC_STATUS.FAILURE, exitcode: 127, exception: 'entrypoint failed to start' }));
    this.#lifetime = setTimeout(() => this.finish({ status: GENERIC_STATUS.TIMEOUT, exitcode: 0, exception: 'sandbox lifetime reached' }), init.lifetimeMs);
    this.#lifetime.unref();
  }

  get running(): boolean {
    return this.result === undefined;
  }

  exec(spec: Omit<ExecSpawnSpec, 'env'> & { env: Record<string, string> }): ServerExec {
    const exec = new ServerExec({ ...spec, env: { ...this.env, ...spec.env, [SANDBOX_ID_ENV]: this.id, LANES_SANDBOX_WORKDIR: this.dir } });
    this.execs.set(spec.execId, exec);
    return exec;
  }

  /** Ends the sandbox (first caller wins) and kills every process in it. */
  finish(result: SandboxResult): void {
    if (this.result) return;
    this.result = result;
    clearTimeout(this.#lifetime);
    const groups = [this.root.pid, ...[...this.execs.values()].map((e) => e.pid)].filter((p): p is number => p !== undefined);
    this.reaped = reapSandbox({ id: this.id }, groups).then(() => undefined);
    if (this.root.pid !== undefined) {
      try {
        process.kill(-this.root.pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const exec of this.execs.values()) {
      exec.endWithTask();
      exec.notify();
    }
    for (const waiter of [...this.#waiters]) waiter();
  }

  /** Resolves when the sandbox finishes, or after `ms`, or when `signal` aborts. */
  async waitFinished(ms: number, signal?: AbortSignal): Promise<void> {
    if (!this.running || ms <= 0) return;
    await new Promise<void>((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      this.#waiters.add(done);
      signal?.addEventListener('abort', done, { once: true });
    });
  }
}
