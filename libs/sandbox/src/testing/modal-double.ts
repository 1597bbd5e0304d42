import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { InvalidError, NotFoundError } from 'modal';
import { ClientError, Status } from 'nice-grpc';
import type {
  ModalAppLike,
  ModalClientLike,
  ModalExecParamsLike,
  ModalImageLike,
  ModalSandboxCreateParamsLike,
  ModalSandboxLike,
  ModalSecretLike,
  ModalVolumeLike,
} from '../modal-client.js';
import { DoubleImage, DoubleSecret } from './modal-double-objects.js';
import { DoubleSandbox, SandboxRecord, type DoubleOp, type DoubleServer } from './modal-double-sandbox.js';

export { type DoubleOp } from './modal-double-sandbox.js';

/** `calls` and `execs` keep the most recent entries only, so a long end-to-end run stays small. */
const MAX_LOG_ENTRIES = 10_000;
/** The SDK's default sandbox lifetime when `timeoutMs` is not given: five minutes. */
const SDK_DEFAULT_SANDBOX_LIFETIME_MS = 300_000;

export interface ModalDoubleOptions {
  /** Where sandboxes get their private directories; a fresh temp dir by default (removed by shutdown). */
  rootDir?: string;
  /**
   * When a sandbox dies under a running exec, that exec's `wait()` never settles (default true),
   * as with the real SDK, whose exec-wait keeps retrying a command router that is gone.
   */
  hangOnSandboxDeath?: boolean;
}

export interface InjectedFailure {
  /** How many calls fail; default 1. */
  times?: number;
  /** gRPC status of the failure; default UNAVAILABLE (a transport failure). */
  code?: Status;
}

export interface DoubleSandboxInfo {
  id: string;
  appId: string;
  imageId: string;
  running: boolean;
  exitCode: number | null;
  tags: Record<string, string>;
  env: Record<string, string>;
  volumes: Record<string, string>;
  rootPid: number | undefined;
  /** The lifetime the sandbox was created with (the SDK's 5 minutes when none was given). */
  lifetimeMs: number;
  /** Exec'd processes whose wait has not settled. */
  execs: number;
}

const live = new Set<ModalDouble>();
// A test worker that exits without shutdown() must not leave sandbox processes behind.
process.once('exit', () => {
  for (const d of live) d.shutdown();
});

/**
 * A faithful stand-in for the slice of `ModalClient` lanes uses (see `ModalClientLike`). Sandboxes are
 * real local process trees, so `sleep 30`, signals, process groups and escapes behave for real.
 * Semantics follow the SDK: `fromId` does no I/O and works for any id; exec on a finished sandbox
 * throws the SDK's `ConflictError`; ids the server never had give gRPC NOT_FOUND; terminate is
 * idempotent and a terminated sandbox polls 137; there is no per-process kill; errors are the SDK's
 * own classes (`modal`, `nice-grpc`). Tests steer it with `injectFailure`, `latency`, `kill`, `inspect`.
 */
export class ModalDouble implements ModalClientLike, DoubleServer {
  readonly rootDir: string;
  readonly hangOnSandboxDeath: boolean;
  /** Artificial delays, mutable at runtime: a slow create or a slow first exec. */
  readonly latency = { createMs: 0, execStartMs: 0 };
  /** Every RPC the double served (or failed), in order. */
  readonly calls: Array<{ op: DoubleOp; sandboxId?: string }> = [];
  /** Every exec that reached a live sandbox: argv and SDK params, in order. */
  readonly execs: Array<{ sandboxId: string; command: string[]; params: ModalExecParamsLike }> = [];
  readonly #ownsRoot: boolean;
  readonly #records = new Map<string, SandboxRecord>();
  readonly #apps = new Map<string, ModalAppLike>();
  readonly #images = new Map<string, DoubleImage>();
  readonly #secrets = new Map<string, DoubleSecret>();
  readonly #volumes = new Map<string, ModalVolumeLike>();
  readonly #badImageTags = new Set<string>();
  readonly #failures = new Map<DoubleOp | '*', Required<InjectedFailure>>();
  #closed = false;

  constructor(options: ModalDoubleOptions = {}) {
    this.#ownsRoot = options.rootDir === undefined;
    this.rootDir = options.rootDir ?? mkdtempSync(join(tmpdir(), 'lanes-modal-double-'));
    mkdirSync(join(this.rootDir, 'sandboxes'), { recursive: true });
    this.hangOnSandboxDeath = options.hangOnSandboxDeath ?? true;
    live.add(this);
  }

  get execStartMs(): number {
    return this.latency.execStartMs;
  }

  // ---- test controls ----------------------------------------------------------------------

  /** The next `times` calls of `op` ('*' = any op) fail with a gRPC ClientError of `code`. */
  injectFailure(op: DoubleOp | '*', failure: InjectedFailure = {}): void {
    this.#failures.set(op, { times: failure.times ?? 1, code: failure.code ?? Status.UNAVAILABLE });
  }

  clearFailures(): void {
    this.#failures.clear();
  }

  /** Makes a secret exist for `secrets.fromName`. */
  defineSecret(name: string, entries: Record<string, string>): void {
    this.#secrets.set(name, new DoubleSecret(name, `st-${randomBytes(6).toString('hex')}`, { ...entries }));
  }

  /** Builds of images from this registry tag fail the way the SDK reports it: a plain Error. */
  failImageBuilds(tag: string): void {
    this.#badImageTags.add(tag);
  }

  /** The sandbox dies from the outside (OOM, host loss): everything in it is killed. */
  kill(sandboxId: string, exitCode = 137): void {
    this.#records.get(sandboxId)?.finish(exitCode);
  }

  inspect(sandboxId: string): DoubleSandboxInfo | undefined {
    const r = this.#records.get(sandboxId);
    if (!r) return undefined;
    return {
      id: r.id,
      appId: r.appId,
      imageId: r.imageId,
      running: r.running,
      exitCode: r.exitCode,
      tags: { ...r.tags },
      env: { ...r.env },
      volumes: { ...r.volumes },
      rootPid: r.root.pid,
      lifetimeMs: r.lifetimeMs,
      execs: r.processes.size,
    };
  }

  runningSandboxIds(): string[] {
    return [...this.#records.values()].filter((r) => r.running).map((r) => r.id);
  }

  /** Kills every sandbox and removes the temp dir it created. Idempotent; does not need close(). */
  shutdown(): void {
    for (const r of this.#records.values()) {
      r.finish(137);
      r.sweep();
    }
    live.delete(this);
    if (this.#ownsRoot) rmSync(this.rootDir, { recursive: true, force: true });
  }

  // ---- "server" side ----------------------------------------------------------------------

  async rpc(op: DoubleOp, sandboxId?: string): Promise<void> {
    this.calls.push(sandboxId === undefined ? { op } : { op, sandboxId });
    if (this.calls.length > MAX_LOG_ENTRIES) this.calls.splice(0, this.calls.length - MAX_LOG_ENTRIES);
    // Let other work interleave, as a network round trip would.
    await Promise.resolve();
    if (this.#closed) throw new ClientError(`/modal.client.ModalClient/${op}`, Status.UNAVAILABLE, 'Channel has been shut down');
    for (const key of [op, '*'] as const) {
      const f = this.#failures.get(key);
      if (f && f.times > 0) {
        f.times -= 1;
        if (f.times === 0) this.#failures.delete(key);
        throw new ClientError(`/modal.client.ModalClient/${op}`, f.code, `injected ${Status[f.code]} for ${op}`);
      }
    }
  }

  record(id: string): SandboxRecord | undefined {
    return this.#records.get(id);
  }

  logExec(entry: { sandboxId: string; command: string[]; params: ModalExecParamsLike }): void {
    this.execs.push(entry);
    if (this.execs.length > MAX_LOG_ENTRIES) this.execs.splice(0, this.execs.length - MAX_LOG_ENTRIES);
  }

  buildImage(image: DoubleImage, _app: ModalAppLike): string {
    const id = `im-${randomBytes(8).toString('hex')}`;
    if (this.#badImageTags.has(image.tag)) {
      throw new Error(`Image build for ${id} failed with the exception:\npull access denied for ${image.tag}`);
    }
    this.#images.set(id, new DoubleImage(this, image.tag, image.layers, id));
    return id;
  }

  // ---- the ModalClientLike surface ---------------------------------------------------------

  readonly apps = {
    fromName: async (name: string, params: { createIfMissing?: boolean } = {}): Promise<ModalAppLike> => {
      await this.rpc('app');
      let app = this.#apps.get(name);
      if (!app) {
        if (!params.createIfMissing) throw new NotFoundError(`App '${name}' not found`);
        app = { appId: `ap-${randomBytes(8).toString('hex')}`, name };
        this.#apps.set(name, app);
      }
      return app;
    },
  };

  readonly images = {
    fromRegistry: (tag: string): ModalImageLike => new DoubleImage(this, tag, []),
    fromId: async (imageId: string): Promise<ModalImageLike> => {
      await this.rpc('image');
      const image = this.#images.get(imageId);
      if (!image) throw new NotFoundError(`Image '${imageId}' not found`);
      return image;
    },
  };

  readonly secrets = {
    fromName: async (name: string): Promise<ModalSecretLike> => {
      await this.rpc('secret');
      const secret = this.#secrets.get(name);
      if (!secret) throw new NotFoundError(`Secret '${name}' not found`);
      return secret;
    },
  };

  readonly volumes = {
    fromName: async (name: string, params: { createIfMissing?: boolean } = {}): Promise<ModalVolumeLike> => {
      await this.rpc('volume');
      let volume = this.#volumes.get(name);
      if (!volume) {
        if (!params.createIfMissing) throw new NotFoundError(`Volume '${name}' not found`);
        volume = { volumeId: `vo-${randomBytes(8).toString('hex')}`, name };
        this.#volumes.set(name, volume);
      }
      return volume;
    },
  };

  readonly sandboxes = {
    create: async (app: ModalAppLike, image: ModalImageLike, params: ModalSandboxCreateParamsLike = {}): Promise<ModalSandboxLike> => {
      if (params.timeoutMs !== undefined && params.timeoutMs <= 0) throw new InvalidError(`timeoutMs must be positive, got ${params.timeoutMs}`);
      if (params.workdir !== undefined && !params.workdir.startsWith('/')) throw new InvalidError(`workdir must be an absolute path, got: ${params.workdir}`);
      const built = await image.build(app);
      const env: Record<string, string> = {};
      for (const secret of params.secrets ?? []) {
        if (!(secret instanceof DoubleSecret)) throw new InvalidError('secret was not created by this client');
        Object.assign(env, secret.entries);
      }
      Object.assign(env, params.env ?? {});
      await this.rpc('create');
      if (this.latency.createMs > 0) await new Promise((r) => setTimeout(r, this.latency.createMs));
      const id = `sb-${randomBytes(10).toString('hex')}`;
      const dir = join(this.rootDir, 'sandboxes', id);
      // A container has a private /tmp; the closest a host process tree gets is its own TMPDIR.
      mkdirSync(join(dir, 'tmp'), { recursive: true });
      const volumes = Object.fromEntries(Object.entries(params.volumes ?? {}).map(([path, v]) => [path, v.name ?? v.volumeId]));
      const record = new SandboxRecord({
        id,
        appId: app.appId,
        imageId: built.imageId,
        dir,
        // A container's environment is its image's, not the host's: pass only what commands need to run.
        env: { PATH: process.env['PATH'] ?? '/usr/local/bin:/usr/bin:/bin', HOME: dir, TMPDIR: join(dir, 'tmp'), ...env },
        tags: params.tags ?? {},
        volumes,
        ...(params.workdir !== undefined ? { workdir: params.workdir } : {}),
        lifetimeMs: params.timeoutMs ?? SDK_DEFAULT_SANDBOX_LIFETIME_MS,
      });
      this.#records.set(id, record);
      return new DoubleSandbox(this, id);
    },
    // No network call, exactly like the SDK: the id is only checked when the handle is used.
    fromId: async (sandboxId: string): Promise<ModalSandboxLike> => new DoubleSandbox(this, sandboxId),
    list: (params: { appId?: string; tags?: Record<string, string> } = {}): AsyncIterable<ModalSandboxLike> => {
      const self = this;
      return (async function* () {
        await self.rpc('list');
        const want = Object.entries(params.tags ?? {});
        for (const r of [...self.#records.values()]) {
          if (!r.running) continue;
          if (params.appId !== undefined && r.appId !== params.appId) continue;
          if (!want.every(([k, v]) => r.tags[k] === v)) continue;
          yield new DoubleSandbox(self, r.id);
        }
      })();
    },
  };

  close(): void {
    this.#closed = true;
  }
}

/** Builds the Modal SDK double. Call `shutdown()` when done (an exit hook is the last resort). */
export function createModalDouble(options: ModalDoubleOptions = {}): ModalDouble {
  return new ModalDouble(options);
}
