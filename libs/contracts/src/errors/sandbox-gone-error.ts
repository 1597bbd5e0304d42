import { LanesError } from './lanes-error.js';

/** The sandbox is dead or no longer exists. The card can run again on a replacement. */
export class SandboxGoneError extends LanesError {
  readonly code = 'SANDBOX_GONE';
  readonly retry = 'transient' as const;
  constructor(readonly sandboxId: string, detail?: string, options?: { cause?: unknown }) {
    super(`sandbox ${sandboxId} is gone${detail ? `: ${detail}` : ''}`, options);
  }
}
