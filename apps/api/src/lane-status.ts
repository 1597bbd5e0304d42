import type { Redis } from 'ioredis';
import { KEY_LIMIT_WAITING, SUPERSEDE_WAITING, type LaneConfig, type LaneStatus } from '@lanes/contracts';
import { KeyLimits, type CardStore, type FleetStore, type LaneQueues } from '@lanes/queue';
import { desiredSlots, livenessOf } from '@lanes/supervision';

export interface LaneStatusDeps {
  queues: LaneQueues;
  store: CardStore;
  fleet: FleetStore;
  lanes: readonly LaneConfig[];
}

const JOB_STATES = ['waiting', 'active', 'delayed', 'prioritized', 'completed', 'failed'] as const;

/**
 * Per lane: queue counts, blocked counts by reason, slots of workers not known to be gone, breaker,
 * desired slots, outage. The API cannot watch beats over time, so it reads the supervisor's
 * published liveness verdicts; a worker without one (no supervisor yet, or it stopped) is unknown
 * and its slots stay listed: unknown never reads as gone. A lane with `maxRunningPerKey` also counts
 * its queued cards parked over their key's limit, as `waiting (key limit)` (read where `redis` is given).
 */
export async function laneStatuses(deps: LaneStatusDeps & { redis?: Redis }): Promise<LaneStatus[]> {
  const [verdicts, isolations] = await Promise.all([deps.fleet.liveness(), deps.fleet.isolations()]);
  return Promise.all(
    deps.lanes.map(async (lane) => {
      const queue = deps.queues.queue(lane.name)!;
      const keyLimits = deps.redis ? new KeyLimits(deps.redis) : undefined;
      const [jobCounts, blocked, slots, breaker, health, parked, open] = await Promise.all([
        queue.getJobCounts(...JOB_STATES),
        deps.store.blocked(lane.name),
        deps.fleet.slots(lane.name),
        deps.fleet.breaker(lane.name),
        deps.fleet.health(lane.name),
        keyLimits?.parkedCounts(lane.name),
        deps.queues.openLoad([lane.name]),
      ]);
      const counts: Record<string, number> = { ...jobCounts, blocked: blocked.length, ...parkedCountsOf(lane, parked) };
      for (const b of blocked) counts[`blocked:${b.blockedReason}`] = (counts[`blocked:${b.blockedReason}`] ?? 0) + 1;
      const live = slots.map((s) => ({ ...s, workerLiveness: livenessOf(verdicts, s.worker) })).filter((s) => s.workerLiveness !== 'gone');
      const desired = desiredSlots(
        {
          waiting: (jobCounts.waiting ?? 0) + (jobCounts.prioritized ?? 0),
          delayed: jobCounts.delayed ?? 0,
          active: jobCounts.active ?? 0,
          liveSlots: live.filter((s) => s.sandbox?.state === 'live').length,
        },
        lane,
        breaker.state,
      );
      return {
        name: lane.name,
        provider: lane.provider,
        counts,
        slots: live,
        breaker,
        desiredSlots: desired.desired,
        outage: health?.status === 'outage',
        ...(isolations[lane.name] ? { isolation: isolations[lane.name] } : {}),
        open: open[0]!,
      };
    }),
  );
}

/**
 * The lane counts of parked cards: `waiting (key limit)` on a lane with `maxRunningPerKey`, and the
 * supersede wait wherever a card is parked in it (any lane takes cards with a `supersedeKey`).
 */
function parkedCountsOf(lane: LaneConfig, parked: { concurrency: number; supersede: number } | undefined): Record<string, number> {
  if (!parked) return {};
  return {
    ...(lane.maxRunningPerKey !== undefined ? { [KEY_LIMIT_WAITING]: parked.concurrency } : {}),
    ...(parked.supersede > 0 ? { [SUPERSEDE_WAITING]: parked.supersede } : {}),
  };
}
