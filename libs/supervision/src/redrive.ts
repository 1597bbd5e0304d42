import type { BlockedReason } from '@lanes/contracts';

export interface BlockedCard {
  id: string;
  lane: string;
  blockedReason: BlockedReason;
  /** When the card was blocked (ms). */
  since: number;
}

/**
 * What just happened in a lane. Both mean a sandbox in that lane just passed its canary:
 * a sandbox is only marked live after its canary, and the breaker only closes on a passed canary.
 */
export type RedriveTrigger = { type: 'sandbox-live'; lane: string } | { type: 'breaker-closed'; lane: string };

export type RedriveDecision = { action: 'redrive'; ids: string[]; reason: string } | { action: 'none'; reason: string };

/** The automatic block reasons; `needs-human` waits for POST /v1/cards/:id/unblock and is never here. */
const AUTOMATIC: ReadonlySet<BlockedReason> = new Set<BlockedReason>(['sandbox-dead', 'provider-outage']);

/**
 * Which blocked cards to re-drive, oldest `since` first (ties by id, duplicates dropped).
 *
 * Both triggers re-drive the lane's `sandbox-dead` AND `provider-outage` cards, never `needs-human`,
 * never another lane's. Why both, for both:
 * - breaker-closed ⇒ a sandbox just passed its canary, which is exactly what sandbox-dead cards wait for.
 * - sandbox-live ⇒ the provider demonstrably works. A provider-outage card blocked while the breaker
 *   stayed closed (one probe failure, below threshold) would otherwise wait for a "breaker closed"
 *   event that never comes: the stranded-work failure the design forbids.
 * A re-driven card that meets the fault again just blocks again and spends its infra budget.
 */
export function selectRedrive(blocked: readonly BlockedCard[], trigger: RedriveTrigger): RedriveDecision {
  const seen = new Set<string>();
  const picked = blocked
    .filter((c) => c.lane === trigger.lane && AUTOMATIC.has(c.blockedReason))
    .sort((a, b) => a.since - b.since || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
    .filter((c) => {
      if (seen.has(c.id)) return false;
      seen.add(c.id);
      return true;
    });
  if (picked.length === 0) {
    return { action: 'none', reason: `${trigger.type} in ${trigger.lane}: no automatically blocked cards` };
  }
  const dead = picked.filter((c) => c.blockedReason === 'sandbox-dead').length;
  return {
    action: 'redrive',
    ids: picked.map((c) => c.id),
    reason: `${trigger.type} in ${trigger.lane}: re-drive ${dead} sandbox-dead and ${picked.length - dead} provider-outage cards`,
  };
}
