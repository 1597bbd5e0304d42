/**
 * Planned sandbox renewal (DESIGN supervision rule 7): a sandbox is replaced before it grows old and
 * before its provider's lifetime could end a card, and an idle slot's sandbox is released when the
 * lane may go below it. None of this is a death: no infra retry, no breaker tick.
 */
export interface SandboxRenewalConfig {
  /** A sandbox this old is replaced between cards (`sandboxRecycleAfterMs`). */
  recycleAfterMs: number;
  /** The lifetime the sandbox was created with: the provider ends it then (Modal's maximum is 24 h). */
  lifetimeMs: number;
  /** An idle slot that may go without a sandbox releases it after this long idle (`idleReleaseMs`). */
  idleReleaseMs: number;
}

export type SandboxRenewalSnapshot =
  /** The slot is about to start a card whose commands may run this long. */
  | { moment: 'card-start'; ageMs: number; cardTimeoutMs: number }
  /** The slot holds no card. `mayRelease`: the slot is above the lane's minSlots in its worker. */
  | { moment: 'idle'; ageMs: number; idleMs: number; mayRelease: boolean };

export type SandboxRenewalDecision = { action: 'keep'; reason: string } | { action: 'recycle'; reason: string } | { action: 'release'; reason: string };

/**
 * | moment     | condition                                          | action  |
 * |------------|----------------------------------------------------|---------|
 * | card-start | age ≥ recycleAfterMs                               | recycle |
 * | card-start | lifetime − age < the card's timeout                | recycle |
 * | idle       | may release, idle ≥ idleReleaseMs                  | release |
 * | idle       | age ≥ recycleAfterMs (replaced before a card waits) | recycle |
 * | otherwise  |                                                    | keep    |
 */
export function evaluateSandboxRenewal(s: SandboxRenewalSnapshot, config: SandboxRenewalConfig): SandboxRenewalDecision {
  const old = s.ageMs >= config.recycleAfterMs;
  if (s.moment === 'card-start') {
    if (old) return { action: 'recycle', reason: `sandbox is ${s.ageMs} ms old (recycle after ${config.recycleAfterMs} ms)` };
    const remainingMs = config.lifetimeMs - s.ageMs;
    if (remainingMs < s.cardTimeoutMs) {
      return { action: 'recycle', reason: `sandbox has ${remainingMs} ms of its lifetime left, less than the card's ${s.cardTimeoutMs} ms` };
    }
    return { action: 'keep', reason: 'young enough for the card' };
  }
  if (s.mayRelease && s.idleMs >= config.idleReleaseMs) return { action: 'release', reason: `idle ${s.idleMs} ms (release after ${config.idleReleaseMs} ms)` };
  if (old) return { action: 'recycle', reason: `sandbox is ${s.ageMs} ms old (recycle after ${config.recycleAfterMs} ms)` };
  return { action: 'keep', reason: s.mayRelease ? 'idle, not for long' : 'idle, kept for minSlots' };
}
