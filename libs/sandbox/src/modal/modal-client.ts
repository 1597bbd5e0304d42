import { ModalClient } from 'modal';
import { ProviderInvalidError } from '@lanes/contracts';
import { MODAL_PROVIDER_NAME } from './modal-errors.js';

/**
 * The narrow slice of the Modal JS SDK (modal@0.11.x) that the lanes provider uses. The real
 * `ModalClient` satisfies it structurally (checked at compile time in `createModalClient`); tests run
 * that same real client against the local Modal server (`testing/modal-server`). Methods use method
 * syntax on purpose: parameter bivariance lets the SDK's nominal classes (App, Image, Secret with #private fields) stand behind these shapes.
 */

export interface ModalAppLike {
  readonly appId: string;
  readonly name?: string;
}

export interface ModalImageLike {
  readonly imageId: string;
  /** Adds a layer of Dockerfile commands (RUN …); returns a new, unbuilt image. */
  dockerfileCommands(commands: string[]): ModalImageLike;
  /** Builds the image in the app. A failed build rejects with a plain Error. */
  build(app: ModalAppLike): Promise<ModalImageLike>;
}

export interface ModalSecretLike {
  readonly name?: string;
}

export interface ModalVolumeLike {
  readonly volumeId: string;
  readonly name?: string;
}

/** A Web ReadableStream with the SDK's convenience readers. */
export interface ModalReadStreamLike<R> extends ReadableStream<R> {
  readText(): Promise<string>;
}

export interface ModalProcessLike {
  readonly stdout: ModalReadStreamLike<string>;
  readonly stderr: ModalReadStreamLike<string>;
  /** Resolves with the exit code (128+signal when signalled). */
  wait(): Promise<number>;
}

export interface ModalExecParamsLike {
  workdir?: string;
  /** Server-side backstop: the process is killed after this long. */
  timeoutMs?: number;
  env?: Record<string, string>;
  mode?: 'text';
}

export interface ModalFilesystemLike {
  /** Creates parent directories; overwrites. */
  writeBytes(data: Uint8Array, remotePath: string): Promise<void>;
}

export interface ModalSandboxLike {
  readonly sandboxId: string;
  readonly filesystem: ModalFilesystemLike;
  exec(command: string[], params?: ModalExecParamsLike): Promise<ModalProcessLike>;
  /** null while running, else the exit code (137 once terminated). */
  poll(): Promise<number | null>;
  terminate(): Promise<void>;
  setTags(tags: Record<string, string>): Promise<void>;
  getTags(): Promise<Record<string, string>>;
  /** Drops local resources; most later calls on this object throw ClientClosedError. */
  detach(): void;
}

export interface ModalSandboxCreateParamsLike {
  timeoutMs?: number;
  workdir?: string;
  env?: Record<string, string>;
  secrets?: ModalSecretLike[];
  volumes?: Record<string, ModalVolumeLike>;
  tags?: Record<string, string>;
}

/** The one control-plane RPC lanes calls directly (see `modal-list.ts` for why); the SDK's stub. */
export interface ModalControlPlaneLike {
  sandboxListV2(request: {
    appId: string;
    includeFinished: boolean;
    tags: Array<{ tagName: string; tagValue: string }>;
    beforeTimestamp?: number;
  }): Promise<{ sandboxes: Array<{ id: string; createdAt: number; tags: Array<{ tagName: string; tagValue: string }> }> }>;
}

export interface ModalClientLike {
  /** `ModalClient.cpClient`: the control-plane stub, with the SDK's auth/retry/timeout middleware. */
  readonly cpClient: ModalControlPlaneLike;
  readonly apps: {
    fromName(name: string, params?: { createIfMissing?: boolean; environment?: string }): Promise<ModalAppLike>;
  };
  readonly images: {
    fromRegistry(tag: string): ModalImageLike;
    fromId(imageId: string): Promise<ModalImageLike>;
  };
  readonly secrets: {
    fromName(name: string, params?: { environment?: string }): Promise<ModalSecretLike>;
  };
  readonly volumes: {
    fromName(name: string, params?: { createIfMissing?: boolean; environment?: string }): Promise<ModalVolumeLike>;
  };
  readonly sandboxes: {
    create(app: ModalAppLike, image: ModalImageLike, params?: ModalSandboxCreateParamsLike): Promise<ModalSandboxLike>;
    /** No network call: returns a handle for any id. */
    fromId(sandboxId: string): Promise<ModalSandboxLike>;
    /** Running sandboxes that carry at least the given tags. */
    list(params?: { appId?: string; tags?: Record<string, string> }): AsyncIterable<ModalSandboxLike>;
  };
  close(): void;
}

export interface ModalClientFactoryOptions {
  /** Defaults to MODAL_TOKEN_ID; when both token fields are unset the SDK falls back to ~/.modal.toml. */
  tokenId?: string;
  /** Defaults to MODAL_TOKEN_SECRET. */
  tokenSecret?: string;
  /** Modal environment; defaults to the profile's. */
  environment?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * How long the SDK may keep retrying one call that Modal throttles (a RESOURCE_EXHAUSTED with a
 * server retry-after). Unset, modal@0.11.1 waits as long as the server keeps asking. 20 s stays
 * under the 30 s call deadline (DEFAULT_MODAL_CALL_TIMEOUT_MS), so a throttled call ends as the
 * SDK's own error (mapped: unavailable, breaker fuel) instead of a blind deadline, and a throttle
 * shorter than that is still ridden out inside the SDK.
 *
 * The client's other bounds, `timeoutMs` and `maxRetries`, are declared by ModalClientParams but
 * not read by modal@0.11.1; every call the provider makes carries our own deadline instead
 * (modal-call-deadline.ts, the connect/exec/file-op deadlines).
 */
export const MODAL_MAX_THROTTLE_WAIT_SECS = 20;

/** Builds the real SDK client from MODAL_TOKEN_ID / MODAL_TOKEN_SECRET (or explicit values). */
export function createModalClient(options: ModalClientFactoryOptions = {}): ModalClientLike {
  const env = options.env ?? process.env;
  const tokenId = options.tokenId ?? env['MODAL_TOKEN_ID'];
  const tokenSecret = options.tokenSecret ?? env['MODAL_TOKEN_SECRET'];
  const real = new ModalClient({
    ...(tokenId ? { tokenId } : {}),
    ...(tokenSecret ? { tokenSecret } : {}),
    ...(options.environment ? { environment: options.environment } : {}),
    maxThrottleWaitSecs: MODAL_MAX_THROTTLE_WAIT_SECS,
  });
  // Without credentials the SDK fails every call with a plain Error, which would read as an outage
  // on the first create: say so now, where it is a configuration error.
  const p = real.profile;
  const hasToken = Boolean(p.tokenId && p.tokenSecret);
  const hasOAuth = Boolean(p.oauthRefreshToken && p.oauthClientId && (p.oauthClientSecret || p.oauthJwtKey));
  if (!hasToken && !hasOAuth) {
    throw new ProviderInvalidError(MODAL_PROVIDER_NAME, 'no Modal credentials: set MODAL_TOKEN_ID and MODAL_TOKEN_SECRET (or a profile in ~/.modal.toml)');
  }
  // The SDK's V1 path (MODAL_SANDBOX_V2=0, or `sandbox_v2 = false` in the profile) is one lanes never
  // runs or tests, and the local Modal server does not serve; refuse it rather than guess.
  if (!p.sandboxV2) {
    throw new ProviderInvalidError(MODAL_PROVIDER_NAME, 'V1 sandboxes are not supported: unset MODAL_SANDBOX_V2 (or remove sandbox_v2 = false from the Modal profile)');
  }
  const client: ModalClientLike = real;
  return client;
}
