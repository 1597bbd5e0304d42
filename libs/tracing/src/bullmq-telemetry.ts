import { BullMQOtel } from 'bullmq-otel';
import { tracingEnabled } from './tracing.js';

let telemetry: BullMQOtel | undefined;

/**
 * BullMQ's own telemetry hook (its `telemetry` option, through bullmq-otel 2.0.1, whose peer range
 * is bullmq >=6 and which needs only @opentelemetry/api): spread into a Queue's or Worker's options.
 * With it, a Worker's `process <lane>` span is the child of the context a job's options carry
 * (`tm`, written at enqueue) and is active while lanes' processor runs; a job with none (a board
 * that adds jobs itself) starts a new trace there. With tracing off it is `{}`: BullMQ then calls
 * straight through, no span and no context.
 */
export function bullmqTelemetry(): { telemetry?: BullMQOtel } {
  if (!tracingEnabled()) return {};
  telemetry ??= new BullMQOtel({ tracerName: 'bullmq' });
  return { telemetry };
}
