import type { CardState } from '@lanes/contracts';
import { installedBullmqVersion, JOB_LAYOUT_BULLMQ_VERSION } from './bullmq-job-layout.js';

/**
 * What Redis holds, when a run's write arrives, that decides whether the run still owns its card.
 * "This run" is the writer's run token.
 */
export interface RunFenceSnapshot {
  /** BullMQ's lock of the card's job: held by this run, by another run, or by nobody (it lapsed). */
  lock: 'this-run' | 'another-run' | 'none';
  /** The card's state now. */
  state: CardState;
  /** Whose run the card records (`runToken`). */
  cardRun: 'this-run' | 'another-run' | 'none';
  /** The job is still in the lane's active list: the stalled check has not handed it on. */
  jobActive: boolean;
  /** The state the run writes. */
  to: CardState;
  /** The run offers to take a lapsed lock back (it has a finished agent run in hand). */
  mayReclaim: boolean;
  /** A board's cancel is kept on the card (`cancelRequestedAt`): the run that was cut off never heard it. */
  cancelRequested: boolean;
}

export type RunFenceDecision =
  | { action: 'write'; reclaim: false; reason: 'the run holds the lock' }
  | { action: 'write'; reclaim: true; reason: 'the lock lapsed and no other run has taken the card since' }
  | { action: 'stale'; reason: string };

/**
 * The fence on a run's writes (DESIGN "No finished run is thrown away"). The rule, row by row:
 *
 * | lock        | the write                                                        | decision          |
 * |-------------|------------------------------------------------------------------|-------------------|
 * | this run    | anything                                                         | write             |
 * | another run | anything                                                         | stale             |
 * | nobody      | the run does not offer to reclaim                                | stale             |
 * | nobody      | a move to running (a run that never started stays unstarted)     | stale             |
 * | nobody      | the card is not running, or records another run (or none)        | stale             |
 * | nobody      | the stalled check handed the job on (not in the active list)     | stale             |
 * | nobody      | a cancel waits on the card (answered 202 while the run was cut off) | stale             |
 * | nobody      | out of running, the card still this run's, the job still active  | write and reclaim |
 *
 * A lapsed lock with the job still active and the card still this run's means that no other run
 * has taken the card: a take sets a lock, and a run that started moved the card to its own token.
 * The write then takes the lock back in the same script, so BullMQ's finishing move that follows
 * holds it. WRITE_LUA in card-script.ts carries out this table; its test runs the table against it.
 */
export function evaluateRunFence(s: RunFenceSnapshot): RunFenceDecision {
  if (s.lock === 'this-run') return { action: 'write', reclaim: false, reason: 'the run holds the lock' };
  if (s.lock === 'another-run') return { action: 'stale', reason: 'another run holds the lock' };
  if (!s.mayReclaim) return { action: 'stale', reason: 'the lock lapsed' };
  if (s.to === 'running') return { action: 'stale', reason: 'the lock lapsed before the run started' };
  if (s.state !== 'running' || s.cardRun !== 'this-run') return { action: 'stale', reason: 'another run has taken the card since' };
  if (!s.jobActive) return { action: 'stale', reason: 'the stalled check handed the job on' };
  // The board was told its cancel was taken: the next run's move to running finds it and ends the card cancelled.
  if (s.cancelRequested) return { action: 'stale', reason: 'a cancel was requested while the run was cut off' };
  return { action: 'write', reclaim: true, reason: 'the lock lapsed and no other run has taken the card since' };
}

/**
 * Taking a lapsed lock back writes BullMQ's lock key and stalled set as its extendLock does, and
 * reads its active list: BullMQ's internals, checked against this version only (run-fence.test.ts
 * and test/chaos/partition.test.ts run BullMQ's own finishing move and stalled check after it).
 * Under any other BullMQ a lapsed lock stays lapsed, and the finished run is discarded as before.
 */
export const RUN_FENCE_BULLMQ_VERSION = JOB_LAYOUT_BULLMQ_VERSION;

/** How long a finished run takes a lapsed lock back for: the lock's own duration, or undefined (no reclaim) under another BullMQ. */
export function reclaimLockMsFor(lockDurationMs: number, bullmqVersion: string = installedBullmqVersion): number | undefined {
  return bullmqVersion === RUN_FENCE_BULLMQ_VERSION ? lockDurationMs : undefined;
}
