import type { BreakerStateName } from '@lanes/contracts';
import { desiredSlots } from './desired-slots.js';

/** One slot of this worker as the scaler sees it. Only an idle slot may be removed. */
export interface SlotView {
  id: string;
  /** A live sandbox (not starting, respawning or dead). */
  live: boolean;
  /** Holds a card (running, or waiting for its sandbox). */
  busy: boolean;
  /** An idle probe or canary is out on its sandbox. */
  probing: boolean;
}

/** What one worker reads before deciding its slot count for one lane. */
export interface SlotScalingSnapshot {
  /** This worker's slots, oldest first. */
  slots: readonly SlotView[];
  /** The lane's cards that want a slot, across every worker: waiting (prioritized included) and active. */
  waiting: number;
  active: number;
  /** Workers hosting the lane (this one included); the lane's desired slots are shared among them. */
  workers: number;
  /** Live slots of the other workers hosting the lane (what the breaker hold keeps, with this worker's). */
  otherLiveSlots?: number;
  breaker: BreakerStateName;
  /** When this worker last added or removed a slot of the lane. */
  lastChangeAt?: number;
  /** Since when the target has stayed below the slot count (carried from the last decision). */
  surplusSince?: number;
}

export interface SlotScalingPolicyConfig {
  /** Lane-wide bounds on desired slots, and the most slots one worker hosts. */
  minSlots: number;
  maxSlots: number;
  slots: number;
  cooldownMs: number;
  downDelayMs: number;
}

/** Every variant carries the `surplusSince` to pass into the next snapshot. */
export type SlotScalingDecision =
  | { action: 'add'; count: number; target: number; surplusSince?: undefined; reason: string }
  | { action: 'remove'; slotIds: string[]; target: number; surplusSince?: number; reason: string }
  | { action: 'hold'; target: number; surplusSince?: number; reason: string };

const clamp = (n: number, lo: number, hi: number): number => Math.min(hi, Math.max(lo, n));

/** This worker's slot range: never fewer than one (BullMQ concurrency is at least 1), never more than `slots`. */
export function workerSlotRange(config: Pick<SlotScalingPolicyConfig, 'minSlots' | 'slots'>): { floor: number; ceiling: number } {
  const ceiling = Math.max(1, config.slots);
  return { floor: clamp(config.minSlots, 1, ceiling), ceiling };
}

/**
 * Slots one worker should host for a lane, and which to add or drop to get there.
 *
 * | situation                                   | action                                      |
 * |---------------------------------------------|---------------------------------------------|
 * | slots < floor                               | add up to the target, no cooldown (boot)    |
 * | any change younger than cooldownMs          | hold (cooldown)                             |
 * | target > slots                              | add target − slots; surplus forgotten       |
 * | target < slots, surplus younger than delay  | hold; remember surplusSince                 |
 * | target < slots, surplus lasted downDelayMs  | remove up to slots − target idle slots      |
 * | target < slots, no slot idle                | hold: a running card is never interrupted   |
 * | target = slots                              | hold; surplus forgotten                     |
 *
 * The target is this worker's share of the lane's desired slots (`desiredSlots`, which also holds
 * scale-up while the breaker is not closed): ceil(desired / workers), within `workerSlotRange`.
 * Growing is prompt (demand is waiting now); shrinking waits out `downDelayMs`: that is the
 * hysteresis, so a gap between bursts does not tear down sandboxes the next burst needs. Idle
 * means live, holding no card and not being probed; the newest idle slots go first.
 */
export function evaluateSlotScaling(snapshot: SlotScalingSnapshot, config: SlotScalingPolicyConfig, now: number): SlotScalingDecision {
  const current = snapshot.slots.length;
  const { floor, ceiling } = workerSlotRange(config);
  const liveSlots = snapshot.slots.filter((s) => s.live).length + (snapshot.otherLiveSlots ?? 0);
  const lane = desiredSlots({ waiting: snapshot.waiting, delayed: 0, active: snapshot.active, liveSlots }, config, snapshot.breaker);
  const workers = Math.max(1, Math.floor(snapshot.workers) || 1);
  const target = clamp(Math.ceil(lane.desired / workers), floor, ceiling);
  const share = `lane wants ${lane.desired} over ${workers} worker(s) → ${target} here (range ${floor}..${ceiling}); ${lane.reason}`;
  const sinceChange = snapshot.lastChangeAt === undefined ? Number.POSITIVE_INFINITY : now - snapshot.lastChangeAt;

  // Below the floor is never a steady state (e.g. at boot): fill it without a cooldown.
  if (current < floor) return { action: 'add', count: target - current, target, reason: `${current} → ${target}, below the floor: ${share}` };
  if (target === current) return { action: 'hold', target, reason: `at target: ${share}` };
  const surplusSince = target < current ? (snapshot.surplusSince ?? now) : undefined;
  if (sinceChange < config.cooldownMs) {
    return {
      action: 'hold',
      target,
      ...(surplusSince !== undefined ? { surplusSince } : {}),
      reason: `cooldown: ${sinceChange} ms since the last change < ${config.cooldownMs} ms; ${share}`,
    };
  }
  if (target > current) return { action: 'add', count: target - current, target, reason: `${current} → ${target}: ${share}` };
  // Above the ceiling (not reached by design: defensive) is not a surplus to wait out.
  if (surplusSince !== undefined && current <= ceiling && now - surplusSince < config.downDelayMs) {
    return { action: 'hold', target, surplusSince, reason: `surplus ${current - target} for ${now - surplusSince} ms < ${config.downDelayMs} ms; ${share}` };
  }
  const idle = snapshot.slots.filter((s) => s.live && !s.busy && !s.probing);
  const slotIds = idle
    .slice(-(current - target))
    .reverse()
    .map((s) => s.id);
  if (!slotIds.length) return { action: 'hold', target, surplusSince, reason: `surplus ${current - target} but no slot is idle; ${share}` };
  const left = current - slotIds.length;
  return {
    action: 'remove',
    slotIds,
    target,
    // Surplus left (its slots were busy): it has waited out the delay; the cooldown paces the rest.
    ...(left > target ? { surplusSince } : {}),
    reason: `${current} → ${left}: ${share}`,
  };
}
