import { defaults, type PollResult } from '@lanes/contracts';
import type { CommandOutcome } from './command-outcome.js';
import type { Suspicion } from './suspect.js';

/**
 * What probing a suspect found (rule 2). Made once, by the caller, with one `poll()` and at most
 * one canary; `classify` only reads it.
 * - `polled` + `canary` absent: poll said something, no canary ran (it is only needed when live).
 * - `probe-failed`: the poll or the canary call itself threw; `error` is the mapped error class.
 */
export type ProbeFinding =
  | { kind: 'not-probed' }
  | { kind: 'polled'; poll: PollResult; canary?: 'answered' | 'silent' }
  | { kind: 'probe-failed'; error: 'provider-unavailable' | 'sandbox-gone' | 'other'; message: string };

export interface ProbeConfig {
  /** Deadline for the `echo <nonce>` canary. Default DEFAULT_CANARY_TIMEOUT_MS (5 s: a live sandbox answers in ms). */
  canaryTimeoutMs: number;
}

export const DEFAULT_PROBE_CONFIG: ProbeConfig = { canaryTimeoutMs: defaults.DEFAULT_CANARY_TIMEOUT_MS };

/**
 * - `probe`: poll(), then a canary if live;
 * - `poll`: poll() once and no canary: a live sandbox lets the result stand as reported;
 * - `seen`: the exec already made the finding, so nothing is called;
 * - `skip`: not suspect, nothing is called.
 */
export type ProbePlan =
  | { action: 'probe'; canaryTimeoutMs: number; reason: string }
  | { action: 'poll'; reason: string }
  | { action: 'seen'; finding: ProbeFinding; reason: string }
  | { action: 'skip'; reason: string };

/**
 * Probe only suspects: poll(), then (if live) a canary with `canaryTimeoutMs`. A suspect whose exec
 * already reported the sandbox gone with the exit code it saw (failure 3: keep what was seen) is
 * not polled again: that observation is the finding, so recovery makes no extra network call.
 * A `death-exit` (an exit status a death may be reported as) gets the poll alone: the command ran
 * and reported, so a live sandbox needs no canary to show it can run one.
 */
export function planProbe(suspicion: Suspicion, config: ProbeConfig = DEFAULT_PROBE_CONFIG, outcome?: CommandOutcome): ProbePlan {
  if (!suspicion.suspect) return { action: 'skip', reason: `not suspect: ${suspicion.reason}` };
  if (outcome?.kind === 'threw' && outcome.error === 'sandbox-gone' && outcome.observedExitCode !== undefined) {
    const exitCode = outcome.observedExitCode;
    return { action: 'seen', finding: { kind: 'polled', poll: { state: 'exited', exitCode } }, reason: `exec saw the sandbox exited(${exitCode}): no second poll` };
  }
  if (suspicion.reason === 'death-exit') {
    return { action: 'poll', reason: 'suspect (death-exit): one poll before the verdict; live lets the result stand' };
  }
  return { action: 'probe', canaryTimeoutMs: config.canaryTimeoutMs, reason: `suspect (${suspicion.reason}): poll, then canary if live` };
}

/** The canary's argv: no shell, the nonce is a plain argument. */
export function canaryCommand(nonce: string): readonly string[] {
  return ['echo', nonce];
}

export type CanaryReading = {
  finding: ProbeFinding;
  reason: string;
  /** The canary ran but missed its deadline: slow, not yet proven silent (see planSecondCanary). */
  missedDeadline?: boolean;
};

/**
 * A late answer is not silence: a second canary with a longer deadline runs before a sandbox whose
 * first canary missed its deadline is called wedged. 4× the deadline rides out a latency spike
 * (a loaded host, a slow control plane) while a truly wedged sandbox still fails within seconds.
 */
export const SECOND_CANARY_DEADLINE_FACTOR = 4;

export type SecondCanaryPlan = { action: 'accept'; reason: string } | { action: 'second'; canaryTimeoutMs: number; reason: string };

/** Slow is not silent: only a canary that missed its deadline earns a second, longer one. */
export function planSecondCanary(first: CanaryReading, config: ProbeConfig = DEFAULT_PROBE_CONFIG): SecondCanaryPlan {
  if (!first.missedDeadline) return { action: 'accept', reason: first.reason };
  const canaryTimeoutMs = config.canaryTimeoutMs * SECOND_CANARY_DEADLINE_FACTOR;
  return {
    action: 'second',
    canaryTimeoutMs,
    reason: `first canary missed its ${config.canaryTimeoutMs} ms deadline: a second gets ${canaryTimeoutMs} ms before the sandbox is called wedged`,
  };
}

/**
 * Turns the canary's outcome (run after poll() said live) into a finding.
 * - exited 0 and a stdout line equal to the nonce → answered
 * - anything else that ran (wrong output, non-zero exit, deadline hit) → silent (wedged)
 * - the canary exec threw → `probe-failed` with that error class: a transport failure is not
 *   evidence that the sandbox is wedged, and "sandbox-gone" is the provider's explicit finding.
 */
export function readCanary(outcome: CommandOutcome, nonce: string): CanaryReading {
  if (outcome.kind === 'threw') {
    return {
      finding: { kind: 'probe-failed', error: outcome.error, message: outcome.message },
      reason: `canary exec threw ${outcome.error}`,
    };
  }
  const live: PollResult = { state: 'live' };
  if (outcome.timedOut) {
    return { finding: { kind: 'polled', poll: live, canary: 'silent' }, reason: 'canary missed its deadline', missedDeadline: true };
  }
  const echoed = outcome.stdout.split('\n').some((line) => line.trim() === nonce);
  if (outcome.exitCode === 0 && echoed) {
    return { finding: { kind: 'polled', poll: live, canary: 'answered' }, reason: 'canary echoed the nonce' };
  }
  return {
    finding: { kind: 'polled', poll: live, canary: 'silent' },
    reason: echoed ? `canary exited ${outcome.exitCode}` : `canary did not echo the nonce (exit ${outcome.exitCode})`,
  };
}
