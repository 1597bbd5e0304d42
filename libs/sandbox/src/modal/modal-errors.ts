import {
  ClientClosedError,
  ConflictError,
  InternalFailure,
  InvalidError,
  AlreadyExistsError,
  NotFoundError,
  ResourceExhaustedError,
  SandboxFilesystemError,
  SandboxTimeoutError,
  TimeoutError,
} from 'modal';
import { ClientError, Status } from 'nice-grpc';
import { LanesError, ProviderInvalidError, ProviderUnavailableError, SandboxGoneError } from '@lanes/contracts';

/** The provider name used in every error this module produces. */
export const MODAL_PROVIDER_NAME = 'modal';

/**
 * Where an SDK error was raised. The same SDK class means different things in different places:
 * NOT_FOUND for a sandbox id means "that sandbox is gone"; NOT_FOUND for a secret or app means the
 * config names something that does not exist.
 */
export type ModalErrorScope =
  /**
   * A call about one sandbox (poll, terminate, tags). A call through its command router (exec,
   * file operations) is read by `readRouterError`, which has a poll confirm a "gone" claim.
   */
  | { kind: 'sandbox'; sandboxId: string }
  /** A call about provider-level objects (app, image lookup, secrets, volumes, create, list). */
  | { kind: 'client' }
  /**
   * Building an image. The SDK reports a failed build as a plain `Error` (no class, no status),
   * so in this scope an unclassified error is the image's fault, not the transport's.
   */
  | { kind: 'image-build'; image: string };

/** gRPC codes that say "try again later": the breaker counts them, nothing is destroyed. */
const TRANSIENT_CODES: ReadonlySet<Status> = new Set([
  Status.UNAVAILABLE,
  Status.DEADLINE_EXCEEDED,
  Status.INTERNAL,
  Status.RESOURCE_EXHAUSTED,
  Status.ABORTED,
  Status.CANCELLED,
  Status.UNKNOWN,
  Status.DATA_LOSS,
]);

/** gRPC codes that say "this request can never succeed as written". */
const INVALID_CODES: ReadonlySet<Status> = new Set([
  Status.INVALID_ARGUMENT,
  Status.PERMISSION_DENIED,
  Status.UNAUTHENTICATED,
  Status.ALREADY_EXISTS,
  Status.OUT_OF_RANGE,
  Status.UNIMPLEMENTED,
]);

/**
 * Node system-error codes of a broken connection. These come from `err.code` on the error object
 * (a stable field), never from the message.
 */
const NETWORK_ERRNO: ReadonlySet<string> = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ECONNABORTED',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENETDOWN',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EPIPE',
  'ERR_HTTP2_STREAM_ERROR',
  'ERR_HTTP2_SESSION_ERROR',
  'ERR_HTTP2_GOAWAY_SESSION',
]);

/** An SDK or gRPC error as one line for a message: `NOT_FOUND: details`, `NotFoundError: …`. */
export function describeModalError(err: unknown): string {
  if (err instanceof ClientError) return `${Status[err.code] ?? err.code}: ${err.details}`;
  if (err instanceof Error) return `${err.name}: ${err.message}`;
  return String(err);
}

function errnoOf(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}

/**
 * True when the SDK or a server said "no such sandbox / it has finished" for a call about one
 * sandbox: the SDK's `NotFoundError` (its filesystem API's "The Sandbox is unavailable. This
 * Sandbox may have already shut down."), `ConflictError` ("has already finished", from
 * SandboxGetTaskId), or a bare gRPC NOT_FOUND / FAILED_PRECONDITION. By class and status only.
 *
 * From the control plane about a sandbox id (poll's SandboxWait, terminate) this is its finding.
 * From the task's command router (exec start and wait, the kill exec, file operations) it is only a
 * claim: Modal's router answers NOT_FOUND once its task has ended (modal-client
 * `task_command_router_client.py` `exec_wait`: "If just the task shuts down, the task command
 * router will return a NOT_FOUND error"), but a retrying router can send it for a live one too.
 * `readRouterError` (modal-router-error.ts) has a poll confirm it before anything reads it as gone.
 */
export function claimsGone(err: unknown): boolean {
  if (err instanceof NotFoundError || err instanceof ConflictError) return true;
  return err instanceof ClientError && (err.code === Status.NOT_FOUND || err.code === Status.FAILED_PRECONDITION);
}

/**
 * Translates anything the Modal SDK (or its gRPC transport) throws into the lanes taxonomy:
 * `SandboxGoneError` (the sandbox is finished or does not exist), `ProviderUnavailableError`
 * (transport, capacity, server trouble: transient) or `ProviderInvalidError` (the request itself is
 * wrong: permanent). Classification is by class and gRPC status only, never by message text.
 *
 * Errors that are already `LanesError`s pass through unchanged. Anything unrecognised is treated as
 * unavailable: "we could not tell" must never read as "the sandbox is dead", and must not fail a
 * card permanently either.
 *
 * In the sandbox scope a `claimsGone` error is read as gone: right for the control plane's answers
 * (poll, terminate). Calls through the command router go through `readRouterError` instead.
 */
export function toLanesError(err: unknown, scope: ModalErrorScope): LanesError {
  if (err instanceof LanesError) return err;
  const detail = describeModalError(err);
  const opts = { cause: err };
  const invalid = () => new ProviderInvalidError(MODAL_PROVIDER_NAME, detail, opts);
  const unavailable = () => new ProviderUnavailableError(MODAL_PROVIDER_NAME, detail, opts);

  // A sandbox-scoped NotFound/Conflict is the sandbox itself; elsewhere it is a named object that is
  // missing (a secret, an app, an image id).
  if (claimsGone(err)) return scope.kind === 'sandbox' ? new SandboxGoneError(scope.sandboxId, detail, opts) : invalid();
  // SDK classes first: the SDK has already read the status for these.
  // ClientClosedError is local state (a detached handle or closed client), not a finding about the
  // sandbox: only an explicit finding may destroy, so it is transient.
  if (err instanceof ClientClosedError) return unavailable();
  if (err instanceof ResourceExhaustedError) return unavailable();
  if (err instanceof InternalFailure) return unavailable();
  if (err instanceof TimeoutError || err instanceof SandboxTimeoutError) return unavailable();
  if (err instanceof InvalidError || err instanceof AlreadyExistsError) return invalid();
  // The SDK's filesystem subclasses name the caller's mistake (not found, is a directory, permission).
  // The base class itself is its catch-all: any unexpected gRPC status of the helper exec (e.g.
  // RESOURCE_EXHAUSTED), or a helper failure it could not read. Could not tell: transient.
  if (err instanceof SandboxFilesystemError) return err.constructor === SandboxFilesystemError ? unavailable() : invalid();

  if (err instanceof ClientError) {
    if (TRANSIENT_CODES.has(err.code)) return unavailable();
    if (INVALID_CODES.has(err.code)) return invalid();
    return unavailable();
  }

  const errno = errnoOf(err);
  if (errno !== undefined && NETWORK_ERRNO.has(errno)) return unavailable();
  // A failed image build surfaces as a plain Error: in that scope it is the image's fault.
  if (scope.kind === 'image-build') return invalid();
  return unavailable();
}

/** True when the error (raw or translated) says the sandbox is gone: the "already gone" of terminate. */
export function isGone(err: unknown, sandboxId: string): boolean {
  return toLanesError(err, { kind: 'sandbox', sandboxId }) instanceof SandboxGoneError;
}
