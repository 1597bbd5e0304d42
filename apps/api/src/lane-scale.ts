import type { Redis } from 'ioredis';
import type { LaneConfig } from '@lanes/contracts';
import { KeyLimits } from '@lanes/queue';
import { evaluateScale, livenessOf, type ScaleDecision } from '@lanes/supervision';
import type { LaneStatusDeps } from './lane-status.js';

/** BullMQ scores a delayed job as dueAt × 0x1000 + a counter (getDelayedScore.lua). */
const DELAYED_SCORE_FACTOR = 0x1000;

/**
 * Reads one lane's queue, blocked set and slots, and decides its scale. Cards parked over their
 * key's limit are no demand: their delayed jobs, due only as the park's backstop, are left out; nor
 * are ready cards that a worker would park, their key's places all taken (KeyLimits.heldBack).
 */
export async function laneScale(deps: LaneStatusDeps & { redis: Redis }, lane: LaneConfig, now: number): Promise<ScaleDecision> {
  const queue = deps.queues.queue(lane.name)!;
  const [counts, dueFlat, blocked, slots, breaker, verdicts] = await Promise.all([
    queue.getJobCounts('waiting', 'prioritized', 'active'),
    // Only jobs due by now: the rest wait on time, and a long delayed set is not read whole.
    deps.redis.zrangebyscore(queue.toKey('delayed'), '-inf', (now + 1) * DELAYED_SCORE_FACTOR - 1, 'WITHSCORES'),
    deps.store.blocked(lane.name),
    deps.fleet.slots(lane.name),
    deps.fleet.breaker(lane.name),
    deps.fleet.liveness(),
  ]);
  const due: Array<{ id: string; dueAt: number }> = [];
  for (let i = 0; i < dueFlat.length; i += 2) due.push({ id: dueFlat[i]!, dueAt: Math.floor(Number(dueFlat[i + 1]) / DELAYED_SCORE_FACTOR) });
  // A parked card (over its key's limit, or behind its supersede key's running card) could not run on another slot.
  const parked = await new KeyLimits(deps.redis).parkedAmong(
    lane.name,
    due.map((d) => d.id),
  );
  const delayed = due.filter((d) => !parked.has(d.id));
  // Ready cards their keys hold back would only be parked by a worker: no demand either.
  const heldBack = await new KeyLimits(deps.redis).heldBack(lane.name, lane.maxRunningPerKey, lane.maxSlots);
  const liveSlots = slots.filter((s) => livenessOf(verdicts, s.worker) !== 'gone' && s.sandbox?.state === 'live').length;
  return evaluateScale(
    {
      waiting: counts.waiting ?? 0,
      prioritized: counts.prioritized ?? 0,
      active: counts.active ?? 0,
      delayed,
      blocked,
      liveSlots,
      breaker: breaker.state,
      heldBack,
    },
    lane,
    now,
  );
}
