import { defaults, type BreakerConfig, type BreakerStateName } from '@lanes/contracts';
import { pruneWindow } from './window.js';

/**
 * One circuit breaker per lane/provider (rule 4), as stored between decisions.
 * - `failures`: create/connect failures still inside `windowMs` (ms timestamps, oldest first).
 * - `retryAt`: while open, when one half-open probe may go; while half-open with a probe in
 *   flight, when that probe's lease expires (see `probeLeaseMs`).
 */
export interface BreakerSnapshot {
  state: BreakerStateName;
  failures: number[];
  openedAt?: number;
  retryAt?: number;
  probeInFlight: boolean;
}

export const INITIAL_BREAKER: BreakerSnapshot = Object.freeze({ state: 'closed', failures: [], probeInFlight: false }) as BreakerSnapshot;

/**
 * BreakerConfig (from the lane) plus the probe lease.
 * `probeLeaseMs`: how long a granted half-open probe may stay in flight before another create is
 * allowed (guards against a probe whose owner crashed). Default: `openMs`. A lane should pass
 * `connectTimeoutMs + canaryTimeoutMs`, the longest an honest probe can take.
 */
export type BreakerPolicyConfig = BreakerConfig & { probeLeaseMs?: number };

/** DESIGN defaults: 5 failures in 60 s opens; retry after 10 s. */
export const DEFAULT_BREAKER_CONFIG: BreakerConfig = {
  failureThreshold: defaults.DEFAULT_BREAKER_FAILURE_THRESHOLD,
  windowMs: defaults.DEFAULT_BREAKER_WINDOW_MS,
  openMs: defaults.DEFAULT_BREAKER_OPEN_MS,
};

export type BreakerTransition = 'opened' | 'half-open' | 'closed';

export interface BreakerStep {
  snapshot: BreakerSnapshot;
  /** Set only when the state changed: emit `breaker.<transition>`. */
  transition?: BreakerTransition;
  reason: string;
}

function open(failures: number[], config: BreakerConfig, now: number): BreakerSnapshot {
  return { state: 'open', failures, openedAt: now, retryAt: now + config.openMs, probeInFlight: false };
}

/**
 * A create failure or connect timeout (or a probe that failed with a provider error).
 * - closed: recorded; opens once `failureThreshold` failures are inside `windowMs` (older ones age out).
 * - half-open: re-opens, retryAt = now + openMs.
 * - open: recorded; retryAt is NOT extended (a late failure of a create started before the
 *   breaker opened is stale news).
 */
export function breakerOnFailure(s: BreakerSnapshot, config: BreakerConfig, now: number): BreakerStep {
  const failures = [...pruneWindow(s.failures, now, config.windowMs), now];
  switch (s.state) {
    case 'closed':
      if (failures.length >= config.failureThreshold) {
        return {
          snapshot: open(failures, config, now),
          transition: 'opened',
          reason: `${failures.length} failures within ${config.windowMs} ms (threshold ${config.failureThreshold}): open until ${now + config.openMs}`,
        };
      }
      return {
        snapshot: { ...s, failures },
        reason: `failure ${failures.length}/${config.failureThreshold} within ${config.windowMs} ms: stays closed`,
      };
    case 'half-open':
      return {
        snapshot: open(failures, config, now),
        transition: 'opened',
        reason: `failure while half-open: re-open until ${now + config.openMs}`,
      };
    case 'open':
      return { snapshot: { ...s, failures }, reason: `failure while open: retryAt stays ${s.retryAt ?? 'unset'}` };
  }
}

/**
 * A sandbox actually passed its canary: the ONLY way to close the breaker or clear its failures.
 * (A successful create is not a reset: it may still miss its connect deadline.)
 */
export function breakerOnCanaryPassed(s: BreakerSnapshot, now: number): BreakerStep {
  const snapshot: BreakerSnapshot = { state: 'closed', failures: [], probeInFlight: false };
  if (s.state === 'closed') {
    return { snapshot, reason: `canary passed at ${now}: failures cleared (${s.failures.length} → 0)` };
  }
  return { snapshot, transition: 'closed', reason: `canary passed at ${now} while ${s.state}: closed` };
}

/**
 * Time passing.
 * - open and now ≥ retryAt → half-open (a missing retryAt counts as due: never strand work).
 * - half-open with a probe in flight and now ≥ retryAt (its lease) → the lease is released so
 *   another probe may go; the state stays half-open.
 * - always: failures older than the window are dropped.
 */
export function breakerOnTick(s: BreakerSnapshot, config: BreakerConfig, now: number): BreakerStep {
  const failures = pruneWindow(s.failures, now, config.windowMs);
  const due = s.retryAt === undefined || now >= s.retryAt;
  if (s.state === 'open' && due) {
    return {
      snapshot: { ...s, state: 'half-open', failures, probeInFlight: false },
      transition: 'half-open',
      reason: `retry time ${s.retryAt ?? 'unset'} reached: half-open, one probe may create`,
    };
  }
  if (s.state === 'half-open' && s.probeInFlight && due) {
    return {
      snapshot: { ...s, failures, probeInFlight: false },
      reason: `half-open probe overdue since ${s.retryAt ?? 'unset'}: lease released`,
    };
  }
  return { snapshot: { ...s, failures }, reason: `${s.state}: nothing due` };
}

export type CreateDecision =
  | { action: 'create'; snapshot: BreakerSnapshot; transition?: BreakerTransition; reason: string }
  | { action: 'probe'; snapshot: BreakerSnapshot; transition?: BreakerTransition; reason: string }
  | { action: 'wait'; retryAt: number; snapshot: BreakerSnapshot; transition?: BreakerTransition; reason: string };

/**
 * May a slot create a sandbox now? Applies `breakerOnTick` first, so callers need not tick.
 * - closed → create.
 * - half-open, no probe in flight → probe: exactly one create, marked `probeInFlight` with a lease
 *   until now + probeLeaseMs (store the returned snapshot before creating).
 * - open, or half-open with a probe in flight → wait until `retryAt` (always > now): the card is
 *   delayed to that time, never failed.
 * `transition` is set when the implied tick moved open → half-open.
 */
export function evaluateCreate(s: BreakerSnapshot, config: BreakerPolicyConfig, now: number): CreateDecision {
  const tick = breakerOnTick(s, config, now);
  const t = tick.snapshot;
  const transition = tick.transition;
  const extra = transition ? { transition } : {};
  switch (t.state) {
    case 'closed':
      return { action: 'create', snapshot: t, ...extra, reason: 'breaker closed' };
    case 'open':
      // Still open after the tick means not due: retryAt is set and > now (the fallback is for the type only).
      return { action: 'wait', retryAt: t.retryAt ?? now + config.openMs, snapshot: t, ...extra, reason: `breaker open until ${t.retryAt}` };
    case 'half-open': {
      if (t.probeInFlight) {
        return {
          action: 'wait',
          retryAt: t.retryAt ?? now + config.openMs,
          snapshot: t,
          ...extra,
          reason: `breaker half-open, probe in flight until ${t.retryAt}`,
        };
      }
      const leaseMs = config.probeLeaseMs ?? config.openMs;
      return {
        action: 'probe',
        snapshot: { ...t, probeInFlight: true, retryAt: now + leaseMs },
        ...extra,
        reason: `breaker half-open: this create is the one probe (lease ${leaseMs} ms)`,
      };
    }
  }
}
