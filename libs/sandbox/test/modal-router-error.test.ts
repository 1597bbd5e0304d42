import { ConflictError, NotFoundError } from 'modal';
import { ClientError, Status } from 'nice-grpc';
import { describe, expect, it } from 'vitest';
import { ProviderInvalidError, ProviderUnavailableError, SandboxGoneError, type PollResult } from '@lanes/contracts';
import { ROUTER_NOT_FOUND_RETRIES, mayRetry, readRouterError } from '../src/modal/modal-router-error.js';

// The one rule for a failed call through a sandbox's command router (exec start and wait, the kill
// exec, file operations): a "gone" claim is confirmed by one poll; only the poll's finding is gone.

const grpc = (code: Status): ClientError => new ClientError('/modal.task_command_router.TaskCommandRouter/TaskExecStart', code, 'task not found');
const LIVE: PollResult = { state: 'live' };
const EXITED_137: PollResult = { state: 'exited', exitCode: 137 };
const EXITED_0: PollResult = { state: 'exited', exitCode: 0 };
const MISSING: PollResult = { state: 'missing' };

type Kind = 'gone' | 'live' | 'failed';
type ErrorClass = typeof SandboxGoneError | typeof ProviderUnavailableError | typeof ProviderInvalidError;

describe('readRouterError', () => {
  it.each<[string, unknown, PollResult | 'poll-throws', Kind, ErrorClass, number | undefined]>([
    ['gRPC NOT_FOUND, poll live', grpc(Status.NOT_FOUND), LIVE, 'live', ProviderUnavailableError, undefined],
    ['gRPC NOT_FOUND, poll exited(137)', grpc(Status.NOT_FOUND), EXITED_137, 'gone', SandboxGoneError, 137],
    ['gRPC NOT_FOUND, poll exited(0): 0 is kept', grpc(Status.NOT_FOUND), EXITED_0, 'gone', SandboxGoneError, 0],
    ['gRPC NOT_FOUND, poll missing', grpc(Status.NOT_FOUND), MISSING, 'gone', SandboxGoneError, undefined],
    ['gRPC NOT_FOUND, the poll fails: not a finding', grpc(Status.NOT_FOUND), 'poll-throws', 'failed', ProviderUnavailableError, undefined],
    ['gRPC FAILED_PRECONDITION, poll live', grpc(Status.FAILED_PRECONDITION), LIVE, 'live', ProviderUnavailableError, undefined],
    ["the SDK's NotFoundError (its filesystem API), poll live", new NotFoundError('The Sandbox is unavailable.'), LIVE, 'live', ProviderUnavailableError, undefined],
    ["the SDK's ConflictError (already finished), poll exited(124)", new ConflictError('finished'), { state: 'exited', exitCode: 124 }, 'gone', SandboxGoneError, 124],
    ['gRPC UNAVAILABLE: no claim, no poll', grpc(Status.UNAVAILABLE), EXITED_137, 'failed', ProviderUnavailableError, undefined],
    ['gRPC INVALID_ARGUMENT: no claim, no poll', grpc(Status.INVALID_ARGUMENT), EXITED_137, 'failed', ProviderInvalidError, undefined],
  ])('%s', async (_label, err, poll, kind, errorClass, observedExitCode) => {
    let polls = 0;
    const reading = await readRouterError(err, 'sb-1', async () => {
      polls++;
      if (poll === 'poll-throws') throw new ProviderUnavailableError('modal', 'SandboxWaitV2 UNAVAILABLE');
      return poll;
    });
    expect(reading.kind).toBe(kind);
    expect(reading.error).toBeInstanceOf(errorClass);
    expect(polls).toBe(kind === 'failed' && poll !== 'poll-throws' ? 0 : 1);
    if (reading.error instanceof SandboxGoneError) {
      expect(reading.error.sandboxId).toBe('sb-1');
      expect(reading.error.observedExitCode).toBe(observedExitCode);
    }
  });

  it('mayRetry: only a claim the poll found live, and only ROUTER_NOT_FOUND_RETRIES times', async () => {
    const live = await readRouterError(grpc(Status.NOT_FOUND), 'sb-1', async () => LIVE);
    const gone = await readRouterError(grpc(Status.NOT_FOUND), 'sb-1', async () => EXITED_137);
    const failed = await readRouterError(grpc(Status.UNAVAILABLE), 'sb-1', async () => LIVE);
    expect(ROUTER_NOT_FOUND_RETRIES).toBe(1);
    expect([1, 2].map((tries) => mayRetry(live, tries))).toEqual([true, false]);
    expect(mayRetry(gone, 1)).toBe(false);
    expect(mayRetry(failed, 1)).toBe(false);
  });
});
