import type { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { rememberCardTrace } from '@lanes/queue';
import { activeTraceId, activeTraceparent, contextOfTraceMetadata, inSpan, recordSpan, tracingEnabled } from '@lanes/tracing';
import type { CardAction } from './decide-card.js';

/**
 * A run's spans, under BullMQ's `process <lane>` span (bullmq-otel: the Worker's telemetry
 * option), which is the active context while the processor runs: `card.queue-wait`, `card.slot`,
 * the runner's `card.run` and `sandbox.exec`, then `card.result`. Each helper is a no-op with
 * tracing off.
 */

/** The card's log fields for its trace: `trace_id` while tracing is on, nothing otherwise. */
export function traceLogFields(): { trace_id?: string } {
  const traceId = activeTraceId();
  return traceId === undefined ? {} : { trace_id: traceId };
}

/**
 * `card.queue-wait`: from the job's enqueue to this first start, under the enqueue's span (the
 * job's telemetry metadata) where there is one. A later start (a retry, a re-drive) waited for a
 * delay or a sandbox, which its own spans and history say, not for the queue.
 */
export function recordQueueWait(job: Job, lane: string): void {
  if (!tracingEnabled() || job.attemptsStarted > 1 || !job.timestamp) return;
  const parent = contextOfTraceMetadata(job.opts.telemetry?.metadata);
  recordSpan('card.queue-wait', { startTimeMs: job.timestamp, attributes: { 'lanes.card.id': job.id ?? '', 'lanes.lane': lane }, ...(parent ? { parent } : {}) });
}

/** `card.slot`: the wait for the slot's sandbox to be ready for the card. */
export function inSlotSpan<T>(slotId: string, fn: () => Promise<T>): Promise<T> {
  return inSpan('card.slot', { attributes: { 'lanes.slot': slotId } }, fn);
}

/**
 * `card.result`: the card's move and its BullMQ move. Throwing is how BullMQ is told of a retry, a
 * block or a cancel, so a throw here is no error of the span; the decision is its attributes.
 */
export function inResultSpan<T>(action: CardAction, fn: () => Promise<T>): Promise<T> {
  const attributes = action.kind === 'discard' ? { 'lanes.action': action.kind } : { 'lanes.action': action.kind, 'lanes.card.state': action.move.to };
  return inSpan('card.result', { attributes, errorOnThrow: false }, fn);
}

/**
 * Notes the run's trace on the card (job-trace.ts in @lanes/queue) as it starts running, so the
 * supervisor's callback delivery continues this trace. Not awaited: it goes ahead of the card's
 * terminal move on the same connection, and a lost note costs only the callback's place in the trace.
 */
export function rememberRunTrace(redis: Redis, cardId: string, log: Logger): void {
  const traceparent = activeTraceparent();
  if (traceparent === undefined) return;
  rememberCardTrace(redis, cardId, traceparent).catch((err: unknown) => log.warn({ err: String(err), event: 'card.trace-note-failed' }, 'card.trace-note-failed'));
}
