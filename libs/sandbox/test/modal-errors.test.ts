import {
  AlreadyExistsError,
  ClientClosedError,
  ConflictError,
  InternalFailure,
  InvalidError,
  NotFoundError,
  ResourceExhaustedError,
  SandboxFilesystemError,
  SandboxFilesystemPermissionError,
  SandboxTimeoutError,
  TimeoutError,
} from 'modal';
import { ClientError, Status } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { ConnectTimeoutError, ProviderInvalidError, ProviderUnavailableError, SandboxGoneError } from '@lanes/contracts';
import { isModalSandboxGone, toModalLanesError, type ModalErrorScope } from '@lanes/sandbox/modal';

const SANDBOX: ModalErrorScope = { kind: 'sandbox', sandboxId: 'sb-1' };
const CLIENT: ModalErrorScope = { kind: 'client' };
const BUILD: ModalErrorScope = { kind: 'image-build', image: 'no/such:image' };

const grpc = (code: Status): ClientError => new ClientError('/modal.client.ModalClient/X', code, 'details');
const errno = (code: string): Error => Object.assign(new Error('socket trouble'), { code });

type Expected = typeof SandboxGoneError | typeof ProviderUnavailableError | typeof ProviderInvalidError;

describe('toLanesError: SDK and gRPC errors → lanes taxonomy (by class and status, never message)', () => {
  it.each<[string, unknown, ModalErrorScope, Expected]>([
    // The sandbox is gone.
    ['NotFoundError on a sandbox call', new NotFoundError('x'), SANDBOX, SandboxGoneError],
    ['ConflictError (sandbox already finished) on a sandbox call', new ConflictError('x'), SANDBOX, SandboxGoneError],
    ['gRPC NOT_FOUND on a sandbox call', grpc(Status.NOT_FOUND), SANDBOX, SandboxGoneError],
    ['gRPC FAILED_PRECONDITION on a sandbox call', grpc(Status.FAILED_PRECONDITION), SANDBOX, SandboxGoneError],
    // Transport and availability: transient, never a death finding.
    ['gRPC UNAVAILABLE', grpc(Status.UNAVAILABLE), SANDBOX, ProviderUnavailableError],
    ['gRPC DEADLINE_EXCEEDED', grpc(Status.DEADLINE_EXCEEDED), SANDBOX, ProviderUnavailableError],
    ['gRPC INTERNAL', grpc(Status.INTERNAL), CLIENT, ProviderUnavailableError],
    ['gRPC RESOURCE_EXHAUSTED', grpc(Status.RESOURCE_EXHAUSTED), CLIENT, ProviderUnavailableError],
    ['gRPC CANCELLED', grpc(Status.CANCELLED), CLIENT, ProviderUnavailableError],
    ['gRPC UNKNOWN', grpc(Status.UNKNOWN), CLIENT, ProviderUnavailableError],
    ['ResourceExhaustedError (no capacity)', new ResourceExhaustedError('x'), CLIENT, ProviderUnavailableError],
    ['InternalFailure', new InternalFailure('x'), CLIENT, ProviderUnavailableError],
    ['TimeoutError', new TimeoutError('x'), SANDBOX, ProviderUnavailableError],
    ['SandboxTimeoutError', new SandboxTimeoutError(), SANDBOX, ProviderUnavailableError],
    ['ClientClosedError (detached handle / closed client) on a sandbox call', new ClientClosedError(), SANDBOX, ProviderUnavailableError],
    ['ClientClosedError on a client call', new ClientClosedError(), CLIENT, ProviderUnavailableError],
    ['ECONNREFUSED', errno('ECONNREFUSED'), CLIENT, ProviderUnavailableError],
    ['ECONNRESET', errno('ECONNRESET'), SANDBOX, ProviderUnavailableError],
    ['ENOTFOUND (DNS)', errno('ENOTFOUND'), CLIENT, ProviderUnavailableError],
    ['an unrecognised Error: "could not tell" is not a finding', new Error('???'), SANDBOX, ProviderUnavailableError],
    ['a thrown non-Error', 'boom', CLIENT, ProviderUnavailableError],
    // The request itself is wrong: permanent.
    ['gRPC INVALID_ARGUMENT', grpc(Status.INVALID_ARGUMENT), CLIENT, ProviderInvalidError],
    ['gRPC PERMISSION_DENIED', grpc(Status.PERMISSION_DENIED), CLIENT, ProviderInvalidError],
    ['gRPC UNAUTHENTICATED', grpc(Status.UNAUTHENTICATED), CLIENT, ProviderInvalidError],
    ['gRPC ALREADY_EXISTS', grpc(Status.ALREADY_EXISTS), CLIENT, ProviderInvalidError],
    ['InvalidError', new InvalidError('x'), SANDBOX, ProviderInvalidError],
    ['AlreadyExistsError', new AlreadyExistsError('x'), CLIENT, ProviderInvalidError],
    ['NotFoundError for a named object (secret, app, image id)', new NotFoundError('x'), CLIENT, ProviderInvalidError],
    ['gRPC NOT_FOUND outside a sandbox call', grpc(Status.NOT_FOUND), CLIENT, ProviderInvalidError],
    ['a SandboxFilesystemError (permission)', new SandboxFilesystemPermissionError('x'), SANDBOX, ProviderInvalidError],
    ["the SDK's catch-all SandboxFilesystemError (an unexpected gRPC status of its fs helper)", new SandboxFilesystemError('unexpected'), SANDBOX, ProviderUnavailableError],
    ['a plain Error from an image build (bad image)', new Error('Image build for im-1 failed'), BUILD, ProviderInvalidError],
    ['a transport error during an image build stays transient', grpc(Status.UNAVAILABLE), BUILD, ProviderUnavailableError],
  ])('%s', (_label, raw, scope, expected) => {
    const mapped = toModalLanesError(raw, scope);
    expect(mapped).toBeInstanceOf(expected);
    expect(mapped.cause).toBe(raw);
    if (mapped instanceof SandboxGoneError) expect(mapped.sandboxId).toBe('sb-1');
  });

  it('classification ignores the message: a NOT_FOUND-sounding message on UNAVAILABLE stays transient', () => {
    const lying = new ClientError('/x', Status.UNAVAILABLE, 'Sandbox not found, already finished');
    expect(toModalLanesError(lying, SANDBOX)).toBeInstanceOf(ProviderUnavailableError);
    expect(toModalLanesError(new Error('NotFoundError: sandbox terminated'), SANDBOX)).toBeInstanceOf(ProviderUnavailableError);
  });

  it('passes lanes errors through unchanged', () => {
    const timeout = new ConnectTimeoutError('modal', 10, 'sb-1');
    expect(toModalLanesError(timeout, SANDBOX)).toBe(timeout);
  });

  it('keeps the retry class: gone and unavailable are transient, invalid is permanent', () => {
    expect(toModalLanesError(grpc(Status.NOT_FOUND), SANDBOX).retry).toBe('transient');
    expect(toModalLanesError(grpc(Status.UNAVAILABLE), SANDBOX).retry).toBe('transient');
    expect(toModalLanesError(grpc(Status.PERMISSION_DENIED), CLIENT).retry).toBe('permanent');
  });

  it('isGone answers "already gone" for terminate', () => {
    expect(isModalSandboxGone(new NotFoundError('x'), 'sb-1')).toBe(true);
    expect(isModalSandboxGone(grpc(Status.NOT_FOUND), 'sb-1')).toBe(true);
    expect(isModalSandboxGone(grpc(Status.UNAVAILABLE), 'sb-1')).toBe(false);
  });
});
