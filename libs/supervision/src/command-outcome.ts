/** The provider error classes a sandbox call can throw, as the caller mapped them (by error class, never by message). */
export type ProviderErrorKind = 'sandbox-gone' | 'provider-unavailable' | 'other';

/**
 * What running one command in a sandbox produced: it exited (possibly after a timeout or a cancel
 * killed its process group), or the exec call itself threw.
 */
export type CommandOutcome =
  | {
      kind: 'exited';
      exitCode: number;
      stdout: string;
      stderr: string;
      /** The command hit its deadline and its process group was killed. */
      timedOut: boolean;
      /** The command was cancelled by the user and its process group was killed. */
      cancelled: boolean;
    }
  | {
      kind: 'threw';
      error: ProviderErrorKind;
      message: string;
      /** With `sandbox-gone`: the sandbox's exit code the provider saw while the command ran, if any. */
      observedExitCode?: number;
    };
