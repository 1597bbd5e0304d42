import { randomBytes, randomUUID } from 'node:crypto';
import { ConnectTimeoutError, ProviderInvalidError, ProviderUnavailableError, agentLimits, defaults, type SandboxSpec, type SandboxTags } from '@lanes/contracts';
import { bestEffort, type CleanupErrorSink } from '../best-effort.js';
import { DeadlineExceeded, withDeadline } from '../deadline.js';
import { withCallDeadline } from './modal-call-deadline.js';
import { createModalClient, type ModalClientFactoryOptions, type ModalClientLike, type ModalSandboxLike } from './modal-client.js';
import { MODAL_PROVIDER_NAME, isGone, toLanesError } from './modal-errors.js';
import { listByTags } from './modal-list.js';
import { canaryArgv } from './modal-exec-scripts.js';
import { ModalResources } from './modal-resources.js';
import { sdkTimeoutMs } from './modal-timeouts.js';
import { ModalSandboxHandle, type ModalHandleTiming } from './modal-sandbox-handle.js';
import type { CreateOptions, SandboxHandle, SandboxProvider, SandboxRef } from '../provider.js';

/** The Modal app that owns lanes sandboxes unless configured otherwise. */
export const DEFAULT_MODAL_APP_NAME = 'lanes';
/** The lanes directory inside a Modal sandbox (cards, outputs). */
export const DEFAULT_MODAL_WORKDIR = '/lanes';
/**
 * A dead sandbox under a running command is noticed within this. Each running command costs one
 * poll RPC per period, so 100 busy slots make 50 RPC/s: cheap, and deaths surface in seconds.
 */
export const DEFAULT_MODAL_LIVENESS_POLL_INTERVAL_MS = 2_000;
/** SDK backstop = deadline + 3 × kill grace + this: it only fires if our own group kill failed. */
export const DEFAULT_MODAL_BACKSTOP_MARGIN_MS = 10_000;
/** After a command exits, its output streams get this long to reach EOF. */
export const DEFAULT_MODAL_OUTPUT_DRAIN_MS = 1_000;
/** Output kept per stream in an ExecResult (the tail): 1 Mi characters. */
export const DEFAULT_MODAL_MAX_OUTPUT_CHARS = agentLimits.DEFAULT_MAX_OUTPUT_CHARS;
/**
 * Deadline of one file read or write. The SDK does each as an exec of its fs helper and then waits
 * for it with no deadline of its own (the wait retries a silent router forever). A minute covers a
 * cold router connection and the SDK's ~10 s of start retries many times over.
 */
export const DEFAULT_MODAL_FILE_OP_TIMEOUT_MS = 60_000;
/**
 * Deadline of one control-plane call (poll, terminate, a whole list). The SDK sets none, so a
 * server that never answers would hang the liveness race, idle probing and shutdown. Its own retries
 * (3, backing off to 400 ms) fit many times over.
 */
export const DEFAULT_MODAL_CALL_TIMEOUT_MS = 30_000;

export interface ModalProviderOptions {
  /** App that owns the sandboxes; created if missing. Default DEFAULT_MODAL_APP_NAME. */
  appName?: string;
  /** Modal environment; default: the client's. */
  environment?: string;
  /** Dockerfile commands layered on registry images (not on `im-…` ids). Default none. */
  dockerfileCommands?: string[];
  /** Volumes to mount: mount path → volume name (created if missing). Default none. */
  volumes?: Record<string, string>;
  /** The lanes workdir inside each sandbox. Default DEFAULT_MODAL_WORKDIR. */
  workdir?: string;
  /** Sandbox lifetime when the spec sets none. Default DEFAULT_SANDBOX_LIFETIME_MS. */
  sandboxLifetimeMs?: number;
  /** Connect deadline when create() is given none. Default DEFAULT_CONNECT_TIMEOUT_MS. */
  connectTimeoutMs?: number;
  /** Default DEFAULT_MODAL_LIVENESS_POLL_INTERVAL_MS. */
  livenessPollIntervalMs?: number;
  /** Default DEFAULT_MODAL_BACKSTOP_MARGIN_MS. */
  backstopMarginMs?: number;
  /** Default DEFAULT_MODAL_OUTPUT_DRAIN_MS. */
  outputDrainMs?: number;
  /** Default DEFAULT_MODAL_MAX_OUTPUT_CHARS. */
  maxOutputChars?: number;
  /** How fast a command's output is read, stdout and stderr together. Default SANDBOX_OUTPUT_MAX_BYTES_PER_S, as for a local sandbox. */
  outputBytesPerS?: number;
  /** Default DEFAULT_MODAL_FILE_OP_TIMEOUT_MS. */
  fileOpTimeoutMs?: number;
  /** Default DEFAULT_MODAL_CALL_TIMEOUT_MS. */
  callTimeoutMs?: number;
  /** Close the client in close(). Default false: whoever built the client owns it. */
  ownsClient?: boolean;
  /** Where failures of best-effort cleanup (e.g. reaping a timed-out sandbox) go. */
  onCleanupError?: CleanupErrorSink;
  now?: () => number;
}

/**
 * Sandboxes on Modal through the JS SDK (modal@0.11). Construct it with a real client
 * (`createModalClient()`, or a `ModalClient` pointed elsewhere, e.g. the local Modal server in
 * `testing/modal-server` for tests), or use `createModalProvider()`.
 */
export class ModalProvider implements SandboxProvider {
  readonly name = MODAL_PROVIDER_NAME;
  readonly #client: ModalClientLike;
  readonly #resources: ModalResources;
  readonly #options: Required<Pick<ModalProviderOptions, 'workdir' | 'sandboxLifetimeMs' | 'connectTimeoutMs' | 'ownsClient'>> &
    Pick<ModalProviderOptions, 'volumes' | 'onCleanupError'>;
  readonly #timing: ModalHandleTiming;
  readonly #now: () => number;
  /** Terminations of sandboxes that missed their connect deadline; close() lets them finish. */
  readonly #reaping = new Set<Promise<void>>();

  constructor(client: ModalClientLike, options: ModalProviderOptions = {}) {
    this.#client = client;
    this.#now = options.now ?? Date.now;
    this.#resources = new ModalResources(client, {
      appName: options.appName ?? DEFAULT_MODAL_APP_NAME,
      ...(options.environment ? { environment: options.environment } : {}),
      dockerfileCommands: options.dockerfileCommands ?? [],
    });
    this.#options = {
      workdir: options.workdir ?? DEFAULT_MODAL_WORKDIR,
      sandboxLifetimeMs: options.sandboxLifetimeMs ?? defaults.DEFAULT_SANDBOX_LIFETIME_MS,
      connectTimeoutMs: options.connectTimeoutMs ?? defaults.DEFAULT_CONNECT_TIMEOUT_MS,
      ownsClient: options.ownsClient ?? false,
      ...(options.volumes ? { volumes: options.volumes } : {}),
      ...(options.onCleanupError ? { onCleanupError: options.onCleanupError } : {}),
    };
    this.#timing = {
      livenessPollIntervalMs: options.livenessPollIntervalMs ?? DEFAULT_MODAL_LIVENESS_POLL_INTERVAL_MS,
      backstopMarginMs: options.backstopMarginMs ?? DEFAULT_MODAL_BACKSTOP_MARGIN_MS,
      outputDrainMs: options.outputDrainMs ?? DEFAULT_MODAL_OUTPUT_DRAIN_MS,
      maxOutputChars: options.maxOutputChars ?? DEFAULT_MODAL_MAX_OUTPUT_CHARS,
      outputBytesPerS: options.outputBytesPerS ?? agentLimits.SANDBOX_OUTPUT_MAX_BYTES_PER_S,
      fileOpTimeoutMs: options.fileOpTimeoutMs ?? DEFAULT_MODAL_FILE_OP_TIMEOUT_MS,
      callTimeoutMs: options.callTimeoutMs ?? DEFAULT_MODAL_CALL_TIMEOUT_MS,
    };
  }

  /**
   * Creates a sandbox from the base image and proves it answers: create + a canary exec race
   * `connectTimeoutMs`. On timeout the half-created sandbox is terminated by id (now, or as soon as
   * the SDK hands it over) and ConnectTimeoutError is thrown; nothing is left burning compute.
   */
  async create(spec: SandboxSpec, options: CreateOptions = {}): Promise<SandboxHandle> {
    const connectTimeoutMs = options.connectTimeoutMs ?? this.#options.connectTimeoutMs;
    const created = this.#createSandbox(spec);
    let sandbox: ModalSandboxLike | undefined;
    const connect = (async () => {
      sandbox = await created;
      await this.#canary(sandbox, connectTimeoutMs);
      return new ModalSandboxHandle(sandbox, this.#options.workdir, this.#timing, {
        client: this.#client,
        now: this.#now,
        newExecId: () => randomUUID(),
      });
    })();
    try {
      return await withDeadline(connect, connectTimeoutMs, options.signal);
    } catch (err) {
      // Whatever happened, a sandbox that exists (or will) must not be left running.
      this.#reapWhenCreated(created);
      connect.catch(() => {});
      if (err instanceof DeadlineExceeded) throw new ConnectTimeoutError(MODAL_PROVIDER_NAME, connectTimeoutMs, sandbox?.sandboxId);
      if (options.signal?.aborted && err === options.signal.reason) throw err;
      throw toLanesError(err, sandbox ? { kind: 'sandbox', sandboxId: sandbox.sandboxId } : { kind: 'client' });
    }
  }

  async list(tags: Partial<SandboxTags> = {}): Promise<SandboxRef[]> {
    const want: Record<string, string> = {};
    for (const [k, v] of Object.entries(tags)) if (v !== undefined) want[k] = v;
    const app = await this.#resources.app();
    // One SandboxListV2 per page, tags included: no per-sandbox SandboxTagsGetV2 (modal-list.ts).
    const listing = listByTags(this.#client.cpClient, app.appId, want);
    try {
      return await withCallDeadline('list', listing, this.#timing.callTimeoutMs);
    } catch (err) {
      throw toLanesError(err, { kind: 'client' });
    }
  }

  /** fromId (no I/O) + terminate, then detach. Already gone is success. */
  async terminateById(id: string): Promise<void> {
    let sandbox: ModalSandboxLike;
    try {
      sandbox = await this.#client.sandboxes.fromId(id);
    } catch (err) {
      if (isGone(err, id)) return;
      throw toLanesError(err, { kind: 'sandbox', sandboxId: id });
    }
    try {
      await withCallDeadline(`terminate ${id}`, sandbox.terminate(), this.#timing.callTimeoutMs);
    } catch (err) {
      if (!isGone(err, id)) throw toLanesError(err, { kind: 'sandbox', sandboxId: id });
    } finally {
      sandbox.detach();
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.#reaping]);
    if (this.#options.ownsClient) this.#client.close();
  }

  async #createSandbox(spec: SandboxSpec): Promise<ModalSandboxLike> {
    // Modal requires a lifetime; lanes sets one on every sandbox, checked before any call is made.
    const lifetimeMs = sdkTimeoutMs('sandbox timeoutMs', spec.timeoutMs ?? this.#options.sandboxLifetimeMs);
    const [app, image, secrets, volumes] = await Promise.all([
      this.#resources.app(),
      this.#resources.image(spec.image),
      Promise.all((spec.secrets ?? []).map((name) => this.#resources.secret(name))),
      Promise.all(Object.entries(this.#options.volumes ?? {}).map(async ([path, name]) => [path, await this.#resources.volume(name)] as const)),
    ]);
    try {
      return await this.#client.sandboxes.create(app, image, {
        timeoutMs: lifetimeMs,
        env: { ...(spec.env ?? {}) },
        secrets,
        ...(volumes.length > 0 ? { volumes: Object.fromEntries(volumes) } : {}),
        tags: { lane: spec.tags.lane, slot: spec.tags.slot, worker: spec.tags.worker },
      });
    } catch (err) {
      throw toLanesError(err, { kind: 'client' });
    }
  }

  /** First command: proves exec works and the image has what the group wrapper needs. */
  async #canary(sandbox: ModalSandboxLike, timeoutMs: number): Promise<void> {
    const nonce = randomBytes(12).toString('hex');
    const scope = { kind: 'sandbox' as const, sandboxId: sandbox.sandboxId };
    let code: number;
    let stdout: string;
    try {
      const proc = await sandbox.exec(canaryArgv(this.#options.workdir, nonce), { timeoutMs: sdkTimeoutMs('canary timeoutMs', timeoutMs) });
      [code, stdout] = await Promise.all([proc.wait(), proc.stdout.readText()]);
    } catch (err) {
      throw toLanesError(err, scope);
    }
    if (code === 0 && stdout.includes(nonce)) return;
    if (code === 126 || code === 127) {
      throw new ProviderInvalidError(MODAL_PROVIDER_NAME, `sandbox ${sandbox.sandboxId}: image lacks sh or setsid (canary exit ${code})`);
    }
    throw new ProviderUnavailableError(MODAL_PROVIDER_NAME, `sandbox ${sandbox.sandboxId} failed its connect canary (exit ${code})`);
  }

  #reapWhenCreated(created: Promise<ModalSandboxLike>): void {
    const reap = created
      .then((sandbox) => bestEffort(`terminate ${sandbox.sandboxId}`, () => this.terminateById(sandbox.sandboxId), this.#options.onCleanupError))
      .catch(() => {
        // create itself failed: there is nothing to reap.
      });
    this.#reaping.add(reap);
    void reap.finally(() => this.#reaping.delete(reap));
  }
}

export interface CreateModalProviderOptions extends ModalProviderOptions, ModalClientFactoryOptions {
  /** Use this client (e.g. one pointed at the local Modal server) instead of building one from MODAL_TOKEN_ID/SECRET. */
  client?: ModalClientLike;
}

/** Builds the provider; without `client`, a real one from MODAL_TOKEN_ID/MODAL_TOKEN_SECRET that it owns. */
export function createModalProvider(options: CreateModalProviderOptions = {}): ModalProvider {
  const { client, tokenId, tokenSecret, env, ...rest } = options;
  if (client) return new ModalProvider(client, rest);
  const real = createModalClient({
    ...(tokenId ? { tokenId } : {}),
    ...(tokenSecret ? { tokenSecret } : {}),
    ...(options.environment ? { environment: options.environment } : {}),
    ...(env ? { env } : {}),
  });
  return new ModalProvider(real, { ownsClient: true, ...rest });
}
