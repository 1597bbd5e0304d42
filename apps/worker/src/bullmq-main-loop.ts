import type { Worker } from 'bullmq';
import { installedBullmqVersion, JOB_LAYOUT_BULLMQ_VERSION } from '@lanes/queue';

/** The one BullMQ internal the worker touches: its main loop's queue (`Worker.mainLoopQueue`, private). */
interface BullMqMainLoop {
  mainLoopQueue?: { add(promise: Promise<undefined>): void } | null;
}

/**
 * BullMQ's main loop reads `concurrency` only when it wakes (a job settles or a blocking fetch
 * returns): its public setter stores the number and wakes nothing (6.7.0). After a raise, lanes
 * wakes the loop by adding a settled promise to its private queue, as BullMQ's own resume() does.
 * That field was checked against this version only (bullmq-main-loop.test.ts: it exists on a real
 * Worker, and the wake makes a raised worker fetch at once); under any other BullMQ nothing is woken,
 * and a raise takes effect when the loop next wakes by itself (a running card ends). Same constant
 * as the job layout and the run fence: one BullMQ version to check on a bump (docs/upgrading-bullmq.md).
 */
export const MAIN_LOOP_BULLMQ_VERSION = JOB_LAYOUT_BULLMQ_VERSION;

/** Whether the main-loop wake may touch BullMQ's private field under this BullMQ version. */
export function mainLoopWakeFor(bullmqVersion: string = installedBullmqVersion): boolean {
  return bullmqVersion === MAIN_LOOP_BULLMQ_VERSION;
}

/** Wakes the worker's main loop after a concurrency raise; false (nothing touched) under another BullMQ or with no loop running. */
export function wakeMainLoop(worker: Worker, bullmqVersion: string = installedBullmqVersion): boolean {
  if (!mainLoopWakeFor(bullmqVersion)) return false;
  const loop = (worker as unknown as BullMqMainLoop).mainLoopQueue;
  if (!loop) return false;
  loop.add(Promise.resolve(undefined));
  return true;
}
