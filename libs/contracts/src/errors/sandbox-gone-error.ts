import { LanesError } from './lanes-error.js';

/** The sandbox is dead or no longer exists. The card can run again on a replacement. */
export class SandboxGoneError extends LanesError {
  readonly code = 'SANDBOX_GONE';
  readonly retry = 'transient' as const;
  /**
   * The sandbox's exit code when the provider saw it while reporting the death (e.g. a liveness
   * poll during the command said exited(137)). Kept as data so recovery needs no second poll.
   */
  readonly observedExitCode: number | undefined;
  constructor(
    readonly sandboxId: string,
    detail?: string,
    options?: { cause?: unknown; observedExitCode?: number },
  ) {
    super(`sandbox ${sandboxId} is gone${detail ? `: ${detail}` : ''}`, options);
    this.observedExitCode = options?.observedExitCode;
  }
}
