import type { CommandOutcome } from './command-outcome.js';

/** Exit codes a dead or vanished sandbox reports with no output: 1 (exec shim), −1 (no status), 137 (SIGKILL). */
export const SUSPECT_EXIT_CODES: readonly number[] = [1, -1, 137];

/** GNU timeout's exit code, and Modal's return code for a sandbox whose lifetime ran out. */
export const LIFETIME_EXIT_CODE = 124;
/** A shell reports a process killed by signal n as 128 + n; an exit code at or above this is a signal. */
export const SIGNAL_EXIT_BASE = 128;

/**
 * Whether an exit code could be a sandbox's death reported as the running command's status
 * (rule 1): 124 (lifetime ran out), −1 (no status) or ≥ 128 (a signal: Modal reports a terminated
 * sandbox's command as 137). Output or not, such an exit buys one poll() before the verdict.
 */
export function isDeathExitCode(exitCode: number): boolean {
  return exitCode === LIFETIME_EXIT_CODE || exitCode === -1 || exitCode >= SIGNAL_EXIT_BASE;
}

/**
 * Why a result is suspect, which decides how it is probed (planProbe):
 * - `provider-error`, `bare-exit`, `hang`: poll(), then a canary if live;
 * - `death-exit`: an exit status a death may be reported as: one poll(), no canary; if the
 *   sandbox is live the result stands as reported.
 */
export type SuspectReason = 'provider-error' | 'bare-exit' | 'hang' | 'death-exit';

export type Suspicion = { suspect: true; reason: SuspectReason; detail: string } | { suspect: false; reason: string };

/** Whitespace-only output carries no information, so it counts as empty (see suspectOf). */
function isBlank(text: string): boolean {
  return text.trim().length === 0;
}

/**
 * Rule 1: is this result suspect, i.e. could the sandbox itself have died?
 *
 * Checked in this order:
 * 1. exec threw (any provider error class)              → suspect `provider-error`
 * 2. the command hung past its deadline (`timedOut`)    → suspect `hang` (even if also cancelled)
 * 3. a user cancel (`cancelled`, not timed out)         → not suspect: the cancel explains the exit
 * 4. exit 1, −1 or 137 with blank stdout AND stderr     → suspect `bare-exit`
 * 5. exit 124, −1 or ≥ 128, with or without output      → suspect `death-exit`
 * 6. anything else                                      → not suspect
 *
 * Lanes' own kills are flagged on the result (`timedOut`, `cancelled`), so a 124 or a signal code
 * lanes caused is read by 2 or 3 and never as a death report (5).
 * "Blank" means empty or whitespace-only: a stray newline from a shim is not evidence that the
 * command ran. Being suspect only buys a probe; it destroys nothing by itself, so the cheap false
 * positive is preferred to missing a dead sandbox.
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
  if (isDeathExitCode(outcome.exitCode)) {
    return {
      suspect: true,
      reason: 'death-exit',
      detail: `exit ${outcome.exitCode}${blank ? '' : ' with output'} could be the sandbox's death reported as the command's status`,
    };
  }
  if (outcome.exitCode === 0) return { suspect: false, reason: 'exit 0' };
  return {
    suspect: false,
    reason: blank ? `exit ${outcome.exitCode} (not a sandbox-death code)` : `exit ${outcome.exitCode} with output`,
  };
}
