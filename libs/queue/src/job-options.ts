import type { JobsOptions } from 'bullmq';
import type { Card, LaneConfig } from '@lanes/contracts';

/** Completed jobs stay visible in Bull Board for a week; the card store keeps the full record. */
export const COMPLETED_JOB_RETENTION_S = 7 * 24 * 3600;
export const FAILED_JOB_RETENTION_S = 30 * 24 * 3600;
/** Between command-failed attempts; infra retries do not use this path. */
export const RETRY_BASE_DELAY_MS = 1_000;

export function jobOptions(card: Card, lane: Pick<LaneConfig, 'attempts'>): JobsOptions {
  return {
    jobId: card.id,
    attempts: lane.attempts,
    // BullMQ: 0 is "no priority"; 1 is the most urgent.
    priority: card.priority,
    backoff: { type: 'exponential', delay: RETRY_BASE_DELAY_MS },
    removeOnComplete: { age: COMPLETED_JOB_RETENTION_S, count: 10_000 },
    removeOnFail: { age: FAILED_JOB_RETENTION_S },
  };
}
