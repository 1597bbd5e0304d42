import type { ContextManager, Span, Telemetry, Tracer } from 'bullmq';
import { BullMQOtel } from 'bullmq-otel';
import { tracingEnabled } from './tracing.js';

/**
 * What BullMQ puts on its spans that an agent wrote: a job's result (`job completed`) and its
 * failure reason (`job failed`: lanes' failure message holds the agent's output tail). Left out,
 * so no agent-controlled text (which may echo a secret the lane maps into it) reaches a collector.
 * The card record keeps both.
 */
export const BULLMQ_DROPPED_ATTRIBUTES: ReadonlySet<string> = new Set(['bullmq.job.result', 'bullmq.job.failed.reason']);

type Attributes = Parameters<Span['setAttributes']>[0];

const kept = (attributes: Attributes | undefined): Attributes | undefined =>
  attributes && Object.fromEntries(Object.entries(attributes).filter(([k]) => !BULLMQ_DROPPED_ATTRIBUTES.has(k)));

/** A BullMQ span whose agent-written attributes are dropped, and whose exceptions keep only their kind. */
class KeptSpan implements Span {
  constructor(private readonly span: Span) {}
  setSpanOnContext(ctx: unknown): unknown {
    return this.span.setSpanOnContext(ctx);
  }
  setAttribute(key: string, value: Parameters<Span['setAttribute']>[1]): void {
    if (!BULLMQ_DROPPED_ATTRIBUTES.has(key)) this.span.setAttribute(key, value);
  }
  setAttributes(attributes: Attributes): void {
    this.span.setAttributes(kept(attributes)!);
  }
  addEvent(name: string, attributes?: Attributes): void {
    this.span.addEvent(name, kept(attributes));
  }
  recordException(exception: Parameters<Span['recordException']>[0]): void {
    this.span.recordException(typeof exception === 'string' ? 'Error' : { name: exception.name ?? 'Error', ...(exception.code !== undefined ? { code: exception.code } : {}) });
  }
  end(): void {
    this.span.end();
  }
}

class KeptTelemetry implements Telemetry {
  readonly tracer: Tracer;
  readonly contextManager: ContextManager;
  constructor(inner: Telemetry) {
    this.contextManager = inner.contextManager;
    this.tracer = { startSpan: (name, options, ctx) => new KeptSpan(inner.tracer.startSpan(name, options, ctx)) };
  }
}

/**
 * BullMQ's own telemetry hook (its `telemetry` option, through bullmq-otel 2.0.1, whose peer range
 * is bullmq >=6 and which needs only @opentelemetry/api): spread into a Queue's or Worker's options.
 * With it, a Worker's `process <lane>` span is the child of the context a job's options carry
 * (`tm`, written at enqueue) and is active while lanes' processor runs; a job with none (a board
 * that adds jobs itself) starts a new trace there. With tracing off it is `{}`: BullMQ then calls
 * straight through, no span and no context.
 */
export function bullmqTelemetry(): { telemetry?: Telemetry } {
  if (!tracingEnabled()) return {};
  // One per queue or worker (a few per lane), made after tracing started: bullmq-otel takes its tracer when made.
  return { telemetry: new KeptTelemetry(new BullMQOtel({ tracerName: 'bullmq' })) };
}
