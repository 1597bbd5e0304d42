import type { ObservedExitCode, Verdict } from '@lanes/contracts';
import type { CommandOutcome } from './command-outcome.js';
import type { ProbeFinding } from './probe.js';
import { suspectOf, type SuspectReason } from './suspect.js';

export interface Classification {
  verdict: Verdict;
  /**
   * The exit code observed at decision time, read from the outcome or the finding already made
   * (never fetched here). `0` stays `0`; "not observed" is `"unknown"`.
   */
  observedExitCode: ObservedExitCode;
  /** True only when the probe itself failed with a provider/transport error: feed it to the lane's breaker. */
  countsTowardBreaker: boolean;
  /** Whether rule 1 judged the outcome suspect (so whether the finding was consulted). */
  suspect: boolean;
  /**
   * The exec call itself failed in transport (not a finding about the sandbox) and the sandbox then
   * answered its canary: the command's fate is unknown, so this is not the command's failure and
   * must spend no attempt. The verdict stays `command-failed` (the sandbox is fine); callers re-run.
   */
  transportFailed: boolean;
  reason: string;
}

/**
 * Rule 2: the supervisor's verdict on one command result.
 *
 * Not suspect (the finding is ignored; only suspects are probed):
 *   exit 0 → ok; anything else → command-failed; observedExitCode = the command's exit code.
 *   A user cancel lands here as command-failed with reason "cancelled…": the caller's cancel path
 *   decides the card state, not this verdict.
 *
 * Suspect, by finding:
 *   polled exited(code)          → sandbox-dead,    observed = code (0 stays 0)
 *   polled missing               → sandbox-dead,    "unknown"
 *   polled live, canary answered → command-failed,  observed = command's exit code, or "unknown" if exec threw;
 *                                  when exec threw provider-unavailable, `transportFailed`: no attempt spent
 *   polled live, canary silent   → sandbox-dead (wedged), "unknown"
 *   polled live, no canary run   → command-failed,  "unknown" (inconclusive: unknown never destroys),
 *                                  except for a `death-exit`, which is polled without a canary: live
 *                                  means the result stands as reported → command-failed, observed =
 *                                  the command's exit code
 *   probe-failed sandbox-gone    → sandbox-dead,    "unknown" (the provider's explicit finding)
 *   probe-failed provider-unavailable → provider-outage, "unknown", countsTowardBreaker
 *                                  (the ONLY path to provider-outage), except after an exec
 *                                  that reported the sandbox gone: that explicit finding stands
 *                                  and a probe that could not reach the provider adds nothing
 *                                  → sandbox-dead, "unknown"
 *   probe-failed other           → command-failed,  "unknown"
 *   not-probed                   → command-failed,  "unknown"
 */
export function classify(outcome: CommandOutcome, finding: ProbeFinding): Classification {
  const suspicion = suspectOf(outcome);
  if (!suspicion.suspect) {
    // Only `exited` outcomes can be non-suspect; a throw is always suspect.
    const exitCode = outcome.kind === 'exited' ? outcome.exitCode : 'unknown';
    const verdict: Verdict = exitCode === 0 ? 'ok' : 'command-failed';
    return { verdict, observedExitCode: exitCode, countsTowardBreaker: false, suspect: false, transportFailed: false, reason: suspicion.reason };
  }

  const why = suspicion.detail;
  const result = (verdict: Verdict, observedExitCode: ObservedExitCode, found: string, countsTowardBreaker = false, transportFailed = false) => ({
    verdict,
    observedExitCode,
    countsTowardBreaker,
    suspect: true,
    transportFailed,
    reason: `${why}; ${found}`,
  });

  switch (finding.kind) {
    case 'not-probed':
      return result('command-failed', 'unknown', 'not probed: unknown never destroys a sandbox');
    case 'probe-failed':
      if (outcome.kind === 'threw' && outcome.error === 'sandbox-gone' && finding.error === 'provider-unavailable') {
        return result('sandbox-dead', 'unknown', `exec reported the sandbox gone and the probe could not reach the provider (${finding.message}): the exec's finding stands`);
      }
      return fromProbeFailure(finding, result);
    case 'polled':
      return fromPoll(outcome, suspicion.reason, finding, result);
  }
}

type Make = (verdict: Verdict, observedExitCode: ObservedExitCode, found: string, countsTowardBreaker?: boolean, transportFailed?: boolean) => Classification;

function fromProbeFailure(finding: Extract<ProbeFinding, { kind: 'probe-failed' }>, result: Make): Classification {
  switch (finding.error) {
    case 'provider-unavailable':
      return result('provider-outage', 'unknown', `probe failed, provider unavailable: ${finding.message}`, true);
    case 'sandbox-gone':
      return result('sandbox-dead', 'unknown', `probe says the sandbox is gone: ${finding.message}`);
    case 'other':
      return result('command-failed', 'unknown', `probe failed inconclusively (${finding.message}): unknown never destroys`);
  }
}

function fromPoll(outcome: CommandOutcome, suspected: SuspectReason, finding: Extract<ProbeFinding, { kind: 'polled' }>, result: Make): Classification {
  switch (finding.poll.state) {
    case 'exited':
      return result('sandbox-dead', finding.poll.exitCode, `poll: sandbox exited(${finding.poll.exitCode})`);
    case 'missing':
      return result('sandbox-dead', 'unknown', 'poll: sandbox missing');
    case 'live':
      if (finding.canary === 'silent') {
        return result('sandbox-dead', 'unknown', 'poll: live, but the canary was silent: the sandbox is wedged');
      }
      if (finding.canary === 'answered') {
        if (outcome.kind === 'threw' && outcome.error === 'provider-unavailable') {
          return result('command-failed', 'unknown', 'poll: live and the canary answered, but exec failed in transport: the command did not fail, re-run it', false, true);
        }
        const own = outcome.kind === 'exited' ? outcome.exitCode : 'unknown';
        return result('command-failed', own, 'poll: live and the canary answered: the command itself failed');
      }
      if (suspected === 'death-exit' && outcome.kind === 'exited') {
        return result('command-failed', outcome.exitCode, 'poll: live: the sandbox did not die, the result stands as reported');
      }
      return result('command-failed', 'unknown', 'poll: live, canary not run: inconclusive, unknown never destroys');
  }
}
