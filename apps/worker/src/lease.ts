import { ConfigError } from '@lanes/contracts';

/**
 * Time from the fence decision to the agent's group being gone, beyond the kill escalation
 * (SIGINT → grace → SIGTERM → grace → SIGKILL): the init's report and event-loop delay.
 */
export const FENCE_SLACK_MS = 250;
/** How often a run's lease is checked; also the worst-case lateness of a time-based fence. */
export const LEASE_TICK_MS = 100;

/** What a slot knows about its job's lock. Times are on this process's monotonic clock. */
export interface LeaseSnapshot {
  /**
   * When the last renewal that Redis confirmed was sent. Redis set the lock's expiry after it
   * received that command, so the lock lives at least until this plus the lock duration, whatever
   * happened since (an outage does not stop the expiry clock: Redis keeps it as absolute time).
   */
  lastRenewalSentAtMs: number;
  /** BullMQ said the lock is gone (`lockRenewalFailed`), or an extension was refused (0). */
  lost?: 'lock-renewal-failed' | 'extend-refused';
}

export interface LeaseConfig {
  lockDurationMs: number;
  /** Fence this long before the earliest possible expiry, so the agent is dead before anyone else can take the job. */
  fenceMarginMs: number;
}

export type LeaseDecision =
  | { action: 'hold'; fenceAtMs: number; reason: string }
  | { action: 'fence'; cause: 'lock-renewal-failed' | 'extend-refused' | 'renewal-overdue'; reason: string };

/**
 * Whether a run still holds its card. Another worker can only take the job once the lock has
 * expired, which is never before `lastRenewalSentAtMs + lockDurationMs`; fencing `fenceMarginMs`
 * before that (margin ≥ the time the kill takes) means a card never runs in two sandboxes at once.
 */
export function evaluateLease(snapshot: LeaseSnapshot, config: LeaseConfig, nowMs: number): LeaseDecision {
  if (snapshot.lost) return { action: 'fence', cause: snapshot.lost, reason: `lock lost: ${snapshot.lost}` };
  const fenceAtMs = snapshot.lastRenewalSentAtMs + config.lockDurationMs - config.fenceMarginMs;
  if (nowMs >= fenceAtMs) {
    return {
      action: 'fence',
      cause: 'renewal-overdue',
      reason: `no confirmed renewal for ${nowMs - snapshot.lastRenewalSentAtMs} ms; the ${config.lockDurationMs} ms lock may expire within the ${config.fenceMarginMs} ms fence margin`,
    };
  }
  return { action: 'hold', fenceAtMs, reason: `lock held at least until ${snapshot.lastRenewalSentAtMs + config.lockDurationMs}` };
}

/** The margin for a lane: the whole kill escalation, a tick of lateness, and slack. */
export function fenceMarginFor(killGraceMs: number): number {
  return 2 * killGraceMs + LEASE_TICK_MS + FENCE_SLACK_MS;
}

/** Renew four times per lock: a renewal may fail or be slow three times before the fence is near. */
export function renewEveryFor(lockDurationMs: number): number {
  return Math.floor(lockDurationMs / 4);
}

/** A lock so short that healthy renewals would not keep ahead of the fence is a configuration error. */
export function assertLeaseFits(lane: string, lockDurationMs: number, killGraceMs: number): void {
  const margin = fenceMarginFor(killGraceMs);
  const renewEveryMs = renewEveryFor(lockDurationMs);
  if (lockDurationMs - margin < 2 * renewEveryMs) {
    throw new ConfigError([
      {
        path: 'lockDurationMs',
        message: `${lockDurationMs} ms is too short for lane ${lane} (killGraceMs ${killGraceMs}): fencing ${margin} ms before expiry must leave room for two renewals ${renewEveryMs} ms apart`,
      },
    ]);
  }
}
