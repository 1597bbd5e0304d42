import type { ObservedExitCode } from '@lanes/contracts';
import type { CanaryReading } from '@lanes/supervision';

/** Which command of the card a result came from: `prepare`, `setup[i]` or `agent`. */
export type Step = string;

/** What one card run came to, after the supervisor's reading of every command. */
export type RunOutcome =
  | { kind: 'done'; result?: unknown; step: Step }
  | { kind: 'needs-human'; reason: string; exitCode: number; step: Step }
  | { kind: 'failed'; failedReason: 'command-failed' | 'timeout'; exitCode?: number; message: string; step: Step }
  | { kind: 'cancelled'; step: Step }
  | { kind: 'sandbox-dead'; observedExitCode: ObservedExitCode; message: string; step: Step }
  /**
   * `canary`: the probe's canary when the sandbox polled live; a run of failed ones is evidence
   * against this sandbox (it cannot run commands), not only against the provider.
   */
  | { kind: 'provider-outage'; message: string; step: Step; canary?: CanaryReading }
  /** The exec failed in transport while the sandbox stayed fine: run the card again, no attempt spent. */
  | { kind: 'interrupted'; message: string; step: Step };
