import type { CanaryReading } from './probe.js';

/**
 * Canaries an idle live sandbox may fail in a row before it is called dead. A sandbox that polls
 * live but cannot run a command (its exec channel is broken) would otherwise keep its slot, and
 * the lane would read "outage" forever; three failures, one per heartbeat, is seconds of evidence
 * and rides out one bad call.
 */
export const DEFAULT_MAX_FAILED_CANARIES = 3;

export interface IdleCanaryConfig {
  maxFailedCanaries: number;
}

export const DEFAULT_IDLE_CANARY_CONFIG: IdleCanaryConfig = { maxFailedCanaries: DEFAULT_MAX_FAILED_CANARIES };

export type IdleCanaryDecision =
  /** It answered: the breaker's reset, and the failure run starts over. */
  | { action: 'passed'; failedCanaries: 0; reason: string }
  /** It failed: counted; `breakerFailure` when the provider could not be reached. */
  | { action: 'count'; failedCanaries: number; breakerFailure: boolean; reason: string }
  /** A bounded run of failures while polling live: the explicit finding that it cannot run commands. */
  | { action: 'mark-dead'; failedCanaries: number; breakerFailure: boolean; reason: string };

/**
 * Reads one canary run on an idle live sandbox (the breaker's probe while it is not closed).
 * A provider-gone finding is not handled here: the idle poll already marks that dead.
 */
export function evaluateIdleCanary(failedCanaries: number, reading: CanaryReading, config: IdleCanaryConfig = DEFAULT_IDLE_CANARY_CONFIG): IdleCanaryDecision {
  const f = reading.finding;
  if (f.kind === 'polled' && f.canary === 'answered') return { action: 'passed', failedCanaries: 0, reason: reading.reason };
  const failed = failedCanaries + 1;
  const breakerFailure = f.kind === 'probe-failed' && f.error === 'provider-unavailable';
  if (failed >= config.maxFailedCanaries) {
    return { action: 'mark-dead', failedCanaries: failed, breakerFailure, reason: `${failed} canaries failed in a row while the sandbox polled live (last: ${reading.reason})` };
  }
  return { action: 'count', failedCanaries: failed, breakerFailure, reason: `canary failed ${failed}/${config.maxFailedCanaries}: ${reading.reason}` };
}
