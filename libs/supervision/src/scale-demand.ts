import type { BlockedReason, BreakerStateName } from '@lanes/contracts';
import { desiredSlots, desiredWorkers, type SlotBounds } from './desired-slots.js';

/** A lane's queue as read for the scale endpoint. */
export interface ScaleSnapshot {
  waiting: number;
  prioritized: number;
  active: number;
  /** Delayed jobs read as possibly due (their due time from the delayed set's score). */
  delayed: ReadonlyArray<{ id: string; dueAt: number }>;
  blocked: ReadonlyArray<{ id: string; blockedReason: BlockedReason }>;
  liveSlots: number;
  breaker: BreakerStateName;
  /**
   * Of the waiting and prioritized cards, those that could not run now for their keys (a
   * concurrency key at its limit, a supersede key whose place is taken): a worker would only park them.
   */
  heldBack?: number;
}

export interface ScaleDepth {
  waiting: number;
  prioritized: number;
  dueDelayed: number;
  active: number;
  redrivePending: number;
  /** Waiting or prioritized cards held back by their keys: in `waiting` and `prioritized`, not in `total`. */
  heldBack: number;
  total: number;
}

export interface ScaleDecision {
  kind: 'scale';
  desiredWorkers: number;
  desiredSlots: number;
  depth: ScaleDepth;
  reason: string;
}

/** Blocked reasons the system re-drives by itself; `needs-human` waits on a person, not on a slot. */
const REDRIVE_REASONS: ReadonlySet<BlockedReason> = new Set(['sandbox-dead', 'provider-outage']);

const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);

/**
 * Worker containers a lane wants, for KEDA. Depth counts every card that wants a slot now or on
 * its re-drive: waiting and prioritized (less those their keys hold back), delayed and due (dueAt ≤ now), active, and blocked
 * sandbox-dead / provider-outage cards. A blocked card's job also sits in delayed, so it counts
 * once, as re-drive-pending. Slots follow `desiredSlots` (bounds, breaker hold); workers are
 * ceil(slots / slots per worker).
 */
export function evaluateScale(snapshot: ScaleSnapshot, lane: SlotBounds, now: number): ScaleDecision {
  const blockedIds = new Set(snapshot.blocked.map((b) => b.id));
  const dueDelayed = snapshot.delayed.filter((d) => d.dueAt <= now && !blockedIds.has(d.id)).length;
  const redrivePending = snapshot.blocked.filter((b) => REDRIVE_REASONS.has(b.blockedReason)).length;
  const waiting = count(snapshot.waiting);
  const prioritized = count(snapshot.prioritized);
  const active = count(snapshot.active);
  const heldBack = Math.min(count(snapshot.heldBack ?? 0), waiting + prioritized);
  const total = waiting + prioritized - heldBack + dueDelayed + active + redrivePending;
  const slots = desiredSlots({ waiting: total - active, delayed: 0, active, liveSlots: snapshot.liveSlots }, lane, snapshot.breaker);
  const workers = desiredWorkers(slots.desired, Math.max(1, lane.slots));
  return {
    kind: 'scale',
    desiredWorkers: workers.desired,
    desiredSlots: slots.desired,
    depth: { waiting, prioritized, dueDelayed, active, redrivePending, heldBack, total },
    reason: `depth ${total} (${waiting} waiting, ${prioritized} prioritized, ${heldBack} of them held back by their keys, ${dueDelayed} due-delayed, ${active} active, ${redrivePending} re-drive-pending); slots: ${slots.reason}; ${workers.reason}`,
  };
}
