import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dirname, isAbsolute } from 'node:path';
import {
  ClientClosedError,
  ConflictError,
  InvalidError,
  NotFoundError,
  SandboxFilesystemIsADirectoryError,
  SandboxFilesystemNotFoundError,
  SandboxFilesystemError,
} from 'modal';
import { ClientError, Status } from 'nice-grpc';
import type {
  ModalExecParamsLike,
  ModalFilesystemLike,
  ModalProcessLike,
  ModalSandboxLike,
} from '../modal-client.js';
import { exitCodeOf } from '../exec-result.js';
import { DoubleContainerProcess } from './modal-double-process.js';
import { killMarked } from './modal-double-sweep.js';

/** Env var that marks every process belonging to one double sandbox. */
export const DOUBLE_SANDBOX_ENV = 'LANES_MODAL_DOUBLE_SANDBOX';

/** The SDK's exit code for a terminated sandbox (GENERIC_STATUS_TERMINATED). */
export const TERMINATED_EXIT_CODE = 137;
/** The SDK's exit code for a sandbox that hit its lifetime (GENERIC_STATUS_TIMEOUT). */
export const LIFETIME_EXIT_CODE = 124;
/** The SDK caps the total length of exec arguments (ARG_MAX). */
export const EXEC_ARG_MAX_BYTES = 2 ** 16;

/** Operations whose transport can be made to fail. */
export type DoubleOp =
  | 'app'
  | 'image'
  | 'secret'
  | 'volume'
  | 'create'
  | 'list'
  | 'exec'
  | 'poll'
  | 'terminate'
  | 'tags'
  | 'filesystem';

/** What a double sandbox needs from the double ("the server"). */
export interface DoubleServer {
  /** Throws when the client is closed or a failure is injected for `op`; records the call. */
  rpc(op: DoubleOp, sandboxId?: string): Promise<void>;
  record(id: string): SandboxRecord | undefined;
  /** Remembers what was exec'd, for tests that check argv shape and backstops. */
  logExec(entry: { sandboxId: string; command: string[]; params: ModalExecParamsLike }): void;
  readonly hangOnSandboxDeath: boolean;
  readonly execStartMs: number;
}

export interface SandboxRecordInit {
  id: string;
  appId: string;
  imageId: string;
  dir: string;
  env: Record<string, string>;
  tags: Record<string, string>;
  volumes: Record<string, string>;
  workdir?: string;
  lifetimeMs: number;
}

/**
 * The server-side state of one sandbox: a real root process plus every process exec'd into it.
 * Death (terminate, lifetime, the root dying, or `kill` from a test) kills all of them.
 */
export class SandboxRecord {
  readonly id: string;
  readonly appId: string;
  readonly imageId: string;
  readonly dir: string;
  readonly env: Record<string, string>;
  readonly volumes: Record<string, string>;
  readonly workdir: string | undefined;
  readonly lifetimeMs: number;
  readonly root: ChildProcess;
  tags: Record<string, string>;
  exitCode: number | null = null;
  readonly processes = new Set<DoubleContainerProcess>();
  readonly #lifetime: NodeJS.Timeout;

  constructor(init: SandboxRecordInit) {
    this.id = init.id;
    this.appId = init.appId;
    this.imageId = init.imageId;
    this.dir = init.dir;
    this.env = { ...init.env, [DOUBLE_SANDBOX_ENV]: init.id };
    this.tags = { ...init.tags };
    this.volumes = { ...init.volumes };
    this.workdir = init.workdir;
    this.lifetimeMs = init.lifetimeMs;
    // The entrypoint: Modal's default is to sleep until timeout or termination.
    this.root = spawn('sleep', ['infinity'], { cwd: init.dir, env: this.env, stdio: 'ignore', detached: true });
    this.root.unref();
    this.root.once('exit', (code, signal) => this.finish(exitCodeOf(code, signal)));
    this.root.once('error', () => this.finish(127));
    this.#lifetime = setTimeout(() => this.finish(LIFETIME_EXIT_CODE), init.lifetimeMs);
    this.#lifetime.unref();
  }

  get running(): boolean {
    return this.exitCode === null;
  }

  /** Ends the sandbox with `exitCode` (first caller wins) and kills every process in it. */
  finish(exitCode: number): void {
    if (this.exitCode !== null) return;
    this.exitCode = exitCode;
    clearTimeout(this.#lifetime);
    for (const proc of this.processes) if (proc.running) proc.markSandboxDied();
    this.sweep();
  }

  /** Kills every process of this sandbox, wherever it moved to. */
  sweep(): void {
    const groups = [this.root.pid, ...[...this.processes].map((p) => p.pid)].filter((p): p is number => p !== undefined);
    killMarked(DOUBLE_SANDBOX_ENV, this.id, groups);
  }
}

/** gRPC codes the SDK's filesystem API reports as "the Sandbox is unavailable" (a NotFoundError). */
const FS_UNAVAILABLE_CODES: ReadonlySet<Status> = new Set([
  Status.NOT_FOUND,
  Status.CANCELLED,
  Status.UNKNOWN,
  Status.DEADLINE_EXCEEDED,
  Status.UNAVAILABLE,
]);

function notFound(method: string, id: string): ClientError {
  return new ClientError(`/modal.client.ModalClient/${method}`, Status.NOT_FOUND, `Sandbox ${id} not found`);
}

/**
 * The client-side Sandbox object, as `client.sandboxes.create/fromId/list` return it. Holds only an
 * id and an attached flag: every call asks the "server" (the double), so two handles for one id see
 * the same sandbox.
 */
export class DoubleSandbox implements ModalSandboxLike {
  readonly sandboxId: string;
  readonly #server: DoubleServer;
  #attached = true;

  constructor(server: DoubleServer, sandboxId: string) {
    this.#server = server;
    this.sandboxId = sandboxId;
  }

  #ensureAttached(): void {
    if (!this.#attached) throw new ClientClosedError();
  }

  /** The record, or the SDK's raw gRPC NOT_FOUND for an id the server never had. */
  #record(method: string): SandboxRecord {
    const rec = this.#server.record(this.sandboxId);
    if (!rec) throw notFound(method, this.sandboxId);
    return rec;
  }

  get filesystem(): ModalFilesystemLike {
    this.#ensureAttached();
    const live = async (): Promise<SandboxRecord> => {
      this.#ensureAttached();
      try {
        await this.#server.rpc('filesystem', this.sandboxId);
      } catch (err) {
        // The SDK's filesystem API turns these gRPC codes into one NotFoundError, dead or not.
        if (err instanceof ClientError && FS_UNAVAILABLE_CODES.has(err.code)) {
          throw new NotFoundError('The Sandbox is unavailable. This Sandbox may have already shut down.');
        }
        throw err;
      }
      const rec = this.#record('SandboxGetTaskId');
      if (!rec.running) throw new ConflictError(`Sandbox ${this.sandboxId} has already finished`);
      return rec;
    };
    const checkPath = (path: string) => {
      if (!isAbsolute(path)) throw new InvalidError(`remotePath must be an absolute path, got: ${path}`);
    };
    return {
      writeBytes: async (data: Uint8Array, remotePath: string) => {
        checkPath(remotePath);
        await live();
        try {
          await mkdir(dirname(remotePath), { recursive: true });
          await writeFile(remotePath, data);
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'EISDIR') throw new SandboxFilesystemIsADirectoryError(`${remotePath} is a directory`);
          throw new SandboxFilesystemError(`write ${remotePath} failed (${code ?? 'unknown'})`);
        }
      },
      readBytes: async (remotePath: string) => {
        checkPath(remotePath);
        await live();
        try {
          return new Uint8Array(await readFile(remotePath));
        } catch (err) {
          const code = (err as NodeJS.ErrnoException).code;
          if (code === 'ENOENT') throw new SandboxFilesystemNotFoundError(`${remotePath} does not exist`);
          if (code === 'EISDIR') throw new SandboxFilesystemIsADirectoryError(`${remotePath} is a directory`);
          throw new SandboxFilesystemError(`read ${remotePath} failed (${code ?? 'unknown'})`);
        }
      },
    };
  }

  async exec(command: string[], params: ModalExecParamsLike = {}): Promise<ModalProcessLike> {
    this.#ensureAttached();
    const argBytes = command.reduce((sum, arg) => sum + arg.length, 0);
    if (argBytes > EXEC_ARG_MAX_BYTES) {
      throw new InvalidError(`Total length of CMD arguments must be less than ${EXEC_ARG_MAX_BYTES} bytes (ARG_MAX). Got ${argBytes} bytes.`);
    }
    if (params.timeoutMs !== undefined && params.timeoutMs <= 0) throw new Error(`timeoutMs must be positive, got ${params.timeoutMs}`);
    if (params.workdir !== undefined && !isAbsolute(params.workdir)) throw new InvalidError(`workdir must be an absolute path, got: ${params.workdir}`);
    await this.#server.rpc('exec', this.sandboxId);
    const rec = this.#record('SandboxGetTaskId');
    // What the SDK throws when it looks up the task of a finished sandbox.
    if (!rec.running) throw new ConflictError(`Sandbox ${this.sandboxId} has already finished`);
    this.#server.logExec({ sandboxId: this.sandboxId, command: [...command], params: { ...params } });
    if (this.#server.execStartMs > 0) await new Promise((r) => setTimeout(r, this.#server.execStartMs));
    if (!rec.running) throw new ConflictError(`Sandbox ${this.sandboxId} has already finished`);
    const proc = new DoubleContainerProcess(
      {
        argv: command,
        cwd: params.workdir ?? rec.workdir ?? rec.dir,
        env: { ...rec.env, ...(params.env ?? {}), [DOUBLE_SANDBOX_ENV]: rec.id },
        ...(params.timeoutMs !== undefined ? { timeoutMs: params.timeoutMs } : {}),
      },
      { hangOnSandboxDeath: this.#server.hangOnSandboxDeath },
    );
    rec.processes.add(proc);
    void proc.wait().then(() => rec.processes.delete(proc));
    return proc;
  }

  async poll(): Promise<number | null> {
    this.#ensureAttached();
    await this.#server.rpc('poll', this.sandboxId);
    return this.#record('SandboxWait').exitCode;
  }

  async terminate(): Promise<void> {
    this.#ensureAttached();
    await this.#server.rpc('terminate', this.sandboxId);
    // Terminating a finished sandbox is fine (idempotent), as on Modal.
    this.#record('SandboxTerminate').finish(TERMINATED_EXIT_CODE);
  }

  async setTags(tags: Record<string, string>): Promise<void> {
    this.#ensureAttached();
    await this.#server.rpc('tags', this.sandboxId);
    this.#record('SandboxTagsSet').tags = { ...tags };
  }

  async getTags(): Promise<Record<string, string>> {
    this.#ensureAttached();
    await this.#server.rpc('tags', this.sandboxId);
    return { ...this.#record('SandboxTagsGet').tags };
  }

  detach(): void {
    this.#attached = false;
  }
}
