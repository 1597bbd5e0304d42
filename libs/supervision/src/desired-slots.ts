import type { BreakerStateName } from '@lanes/contracts';

/** A lane's queue and slots as last read. */
export interface LaneLoad {
  waiting: number;
  /** Delayed cards wait on time (backoff, breaker retry), not on a slot: not counted as demand. */
  delayed: number;
  active: number;
  liveSlots: number;
}

export interface SlotBounds {
  minSlots: number;
  maxSlots: number;
  /** The lane's configured (boot) slot count; reported, the bounds decide. */
  slots: number;
}

export interface SlotsDecision {
  desired: number;
  reason: string;
}

const clamp = (n: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, n));
const count = (n: number): number => (Number.isFinite(n) && n > 0 ? Math.floor(n) : 0);

/**
 * Slots a lane should run: one per card that wants one (demand = active + waiting), clamped to
 * [minSlots, maxSlots]. While the breaker is not closed (open or half-open) it never scales up:
 * the cards are waiting on the provider, not on slots, and new slots could not create sandboxes
 * anyway. It may still scale down to the demand. The ceiling then is max(liveSlots, minSlots).
 */
export function desiredSlots(load: LaneLoad, lane: SlotBounds, breaker: BreakerStateName): SlotsDecision {
  const demand = count(load.active) + count(load.waiting);
  const live = count(load.liveSlots);
  const target = clamp(demand, lane.minSlots, lane.maxSlots);
  if (breaker !== 'closed' && target > live) {
    const held = clamp(live, lane.minSlots, lane.maxSlots);
    return {
      desired: held,
      reason: `breaker ${breaker}: no scale-up (demand ${demand}, ${live} live), hold ${held}`,
    };
  }
  const bound = target === demand ? '' : target === lane.minSlots ? ` (min ${lane.minSlots})` : ` (max ${lane.maxSlots})`;
  return {
    desired: target,
    reason: `demand ${demand} (${count(load.active)} active + ${count(load.waiting)} waiting) → ${target}${bound}`,
  };
}

/**
 * Worker containers needed to host `totalDesiredSlots` at `slotsPerWorker` each: ceil(total / per).
 * `slotsPerWorker` must be a positive integer (a bug in the caller otherwise: throws RangeError).
 */
export function desiredWorkers(totalDesiredSlots: number, slotsPerWorker: number): SlotsDecision {
  if (!Number.isInteger(slotsPerWorker) || slotsPerWorker < 1) {
    throw new RangeError(`slotsPerWorker must be a positive integer, got ${slotsPerWorker}`);
  }
  const total = count(totalDesiredSlots);
  const desired = Math.ceil(total / slotsPerWorker);
  return { desired, reason: `${total} slots / ${slotsPerWorker} per worker → ${desired} workers` };
}
