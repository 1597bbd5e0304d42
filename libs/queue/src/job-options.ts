import type { JobsOptions } from 'bullmq';
import { terminalRetentionMs, type Card, type LaneConfig } from '@lanes/contracts';

/**
 * BullMQ keeps at most this many completed jobs per lane, and as many failed ones (besides their
 * age, the lane's retention): a bound on a lane's finished jobs whatever the retention. A finished
 * job costs about 1 KiB plus its output log, its data cut to the ended-job stub (ended-job-data.ts;
 * bench/retention-memory.ts).
 */
export const COMPLETED_JOB_KEEP_COUNT = 10_000;
export const FAILED_JOB_KEEP_COUNT = 10_000;
/** Between command-failed attempts; infra retries do not use this path. */
export const RETRY_BASE_DELAY_MS = 1_000;

/**
 * The options of a card's job. A finished job goes at the lane's retention like its card (the
 * terminal move sets that expiry on the job's keys, card-script.ts), or sooner past the count caps;
 * BullMQ applies age and count when a job of the lane finishes.
 */
export function jobOptions(card: Card, lane: Pick<LaneConfig, 'attempts'> & Partial<Pick<LaneConfig, 'retention'>>): JobsOptions {
  const ageS = Math.ceil(terminalRetentionMs(lane.retention) / 1_000);
  return {
    jobId: card.id,
    attempts: lane.attempts,
    // BullMQ: 0 is "no priority"; 1 is the most urgent.
    priority: card.priority,
    backoff: { type: 'exponential', delay: RETRY_BASE_DELAY_MS },
    removeOnComplete: { age: ageS, count: COMPLETED_JOB_KEEP_COUNT },
    removeOnFail: { age: ageS, count: FAILED_JOB_KEEP_COUNT },
  };
}
