import type { ObservedExitCode, PollResult } from '@lanes/contracts';
import type { ProviderErrorKind } from './command-outcome.js';

/** What polling an idle slot's sandbox found: a poll() answer, or the call itself failing. */
export type IdleProbeFinding = { kind: 'polled'; poll: PollResult } | { kind: 'probe-failed'; error: ProviderErrorKind; message: string };

export type IdleProbeDecision = { action: 'keep'; reason: string } | { action: 'mark-dead'; observedExitCode: ObservedExitCode; reason: string };

/**
 * A sandbox that dies while its slot is idle is found by the heartbeat's poll, not by the next card,
 * so no card spends an infra retry on it. Only explicit findings mark it dead: exited(code), missing,
 * or the provider saying it is gone. A poll that could not be made keeps it (unknown never destroys).
 */
export function evaluateIdleProbe(finding: IdleProbeFinding): IdleProbeDecision {
  if (finding.kind === 'probe-failed') {
    return finding.error === 'sandbox-gone'
      ? { action: 'mark-dead', observedExitCode: 'unknown', reason: `idle poll: provider says gone (${finding.message})` }
      : { action: 'keep', reason: `idle poll failed (${finding.error}): unknown, keep` };
  }
  switch (finding.poll.state) {
    case 'live':
      return { action: 'keep', reason: 'idle poll: live' };
    case 'exited':
      return { action: 'mark-dead', observedExitCode: finding.poll.exitCode, reason: `idle poll: exited(${finding.poll.exitCode})` };
    case 'missing':
      return { action: 'mark-dead', observedExitCode: 'unknown', reason: 'idle poll: missing' };
  }
}
