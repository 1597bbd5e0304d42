import type { ObservedExitCode } from '@lanes/contracts';

/** Which command of the card a result came from: `prepare`, `setup[i]` or `agent`. */
export type Step = string;

/** What one card run came to, after the supervisor's reading of every command. */
export type RunOutcome =
  | { kind: 'done'; result?: unknown; step: Step }
  | { kind: 'needs-human'; reason: string; exitCode: number; step: Step }
  | { kind: 'failed'; failedReason: 'command-failed' | 'timeout'; exitCode?: number; message: string; step: Step }
  | { kind: 'cancelled'; step: Step }
  | { kind: 'sandbox-dead'; observedExitCode: ObservedExitCode; message: string; step: Step }
  | { kind: 'provider-outage'; message: string; step: Step }
  /** The exec failed in transport while the sandbox stayed fine: run the card again, no attempt spent. */
  | { kind: 'interrupted'; message: string; step: Step };
