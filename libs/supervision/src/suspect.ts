import type { CommandOutcome } from './command-outcome.js';

/** Exit codes a dead or vanished sandbox reports: 1 (exec shim), −1 (no status), 137 (SIGKILL). */
export const SUSPECT_EXIT_CODES: readonly number[] = [1, -1, 137];

export type SuspectReason = 'provider-error' | 'bare-exit' | 'hang';

export type Suspicion = { suspect: true; reason: SuspectReason; detail: string } | { suspect: false; reason: string };

/** Whitespace-only output carries no information, so it counts as empty (see suspectOf). */
function isBlank(text: string): boolean {
  return text.trim().length === 0;
}

/**
 * Rule 1: is this result suspect, i.e. could the sandbox itself have died?
 *
 * Checked in this order:
 * 1. exec threw (any provider error class)            → suspect `provider-error`
 * 2. the command hung past its deadline (`timedOut`)  → suspect `hang` (even if also cancelled)
 * 3. a user cancel (`cancelled`, not timed out)       → not suspect: the cancel explains the exit
 * 4. exit 1, −1 or 137 with blank stdout AND stderr   → suspect `bare-exit`
 * 5. anything else                                    → not suspect
 *
 * "Blank" means empty or whitespace-only: a stray newline from a shim is not evidence that the
 * command ran. Being suspect only buys a probe (poll + canary); it destroys nothing by itself,
 * so the cheap false positive is preferred to missing a dead sandbox.
 */
export function suspectOf(outcome: CommandOutcome): Suspicion {
  if (outcome.kind === 'threw') {
    return { suspect: true, reason: 'provider-error', detail: `exec threw ${outcome.error}: ${outcome.message}` };
  }
  if (outcome.timedOut) {
    return { suspect: true, reason: 'hang', detail: `command hung past its deadline (exit ${outcome.exitCode})` };
  }
  if (outcome.cancelled) {
    return { suspect: false, reason: `cancelled by user (exit ${outcome.exitCode})` };
  }
  const blank = isBlank(outcome.stdout) && isBlank(outcome.stderr);
  if (SUSPECT_EXIT_CODES.includes(outcome.exitCode) && blank) {
    return { suspect: true, reason: 'bare-exit', detail: `bare exit ${outcome.exitCode} with empty stdout and stderr` };
  }
  if (outcome.exitCode === 0) return { suspect: false, reason: 'exit 0' };
  return {
    suspect: false,
    reason: blank ? `exit ${outcome.exitCode} (not a sandbox-death code)` : `exit ${outcome.exitCode} with output`,
  };
}
