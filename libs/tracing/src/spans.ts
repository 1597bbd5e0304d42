import { ROOT_CONTEXT, SpanKind, SpanStatusCode, context, isSpanContextValid, propagation, trace, type Attributes, type Context, type Span } from '@opentelemetry/api';
import { TRACER_NAME, tracingEnabled } from './tracing.js';

export { SpanKind, type Attributes, type Context, type Span };

export interface SpanOptions {
  kind?: SpanKind;
  attributes?: Attributes;
  /** The parent; the active context unless given. */
  parent?: Context;
  /** Epoch ms, for a span that began before this call (a card's wait in its queue). */
  startTimeMs?: number;
  /**
   * Whether a throw marks the span an error (default true). False where throwing is how a step
   * answers (a card's BullMQ move: DelayedError for blocked, UnrecoverableError for cancelled).
   */
  errorOnThrow?: boolean;
}

/**
 * Runs `fn` inside a span, which is the active context for everything `fn` awaits and ends when
 * `fn` settles. With tracing off there is no span: `fn(undefined)` runs as it is.
 */
export async function inSpan<T>(name: string, options: SpanOptions, fn: (span: Span | undefined) => Promise<T>): Promise<T> {
  const started = startSpan(name, options);
  if (!started) return fn(undefined);
  const { span } = started;
  try {
    return await context.with(started.context, () => fn(span));
  } catch (err) {
    if (options.errorOnThrow !== false) {
      span.recordException(err instanceof Error ? err : String(err));
      span.setStatus({ code: SpanStatusCode.ERROR, message: err instanceof Error ? err.message : String(err) });
    }
    throw err;
  } finally {
    span.end();
  }
}

/** A span that began at `startTimeMs` and ends now, with nothing run inside it (a wait that is over). */
export function recordSpan(name: string, options: SpanOptions & { startTimeMs: number }): void {
  startSpan(name, options)?.span.end();
}

/** The W3C `traceparent` naming `span` (its trace and itself), or undefined for no span or a no-op one. */
export function traceparentOf(span: Span | undefined): string | undefined {
  const sc = span?.spanContext();
  if (!sc || !isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}

/** The `traceparent` of the active span, if tracing is on and a span is active. */
export function activeTraceparent(): string | undefined {
  return tracingEnabled() ? traceparentOf(trace.getActiveSpan()) : undefined;
}

/** The trace id of the active span, for log lines; undefined with tracing off. */
export function activeTraceId(): string | undefined {
  if (!tracingEnabled()) return undefined;
  const sc = trace.getActiveSpan()?.spanContext();
  return sc && isSpanContextValid(sc) ? sc.traceId : undefined;
}

/** A context whose remote parent is `traceparent`; undefined when there is none or it does not parse. */
export function contextOfTraceparent(traceparent: string | undefined): Context | undefined {
  if (!traceparent || !tracingEnabled()) return undefined;
  const ctx = propagation.extract(ROOT_CONTEXT, { traceparent });
  return trace.getSpanContext(ctx) ? ctx : undefined;
}

/** A context whose remote parent comes from incoming headers (a board that traces its own POST). */
export function contextOfHeaders(headers: Readonly<Record<string, string | string[] | undefined>>): Context {
  return propagation.extract(ROOT_CONTEXT, headers);
}

/**
 * The active context as BullMQ's telemetry metadata: what bullmq-otel's context manager writes
 * (`getMetadata`: the propagator's carrier as JSON) and its Worker reads back (`fromMetadata`) to
 * parent its `process` span. Undefined with tracing off or no active span.
 */
export function activeTraceMetadata(): string | undefined {
  if (!activeTraceparent()) return undefined;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return JSON.stringify(carrier);
}

/** The context BullMQ telemetry metadata names (`activeTraceMetadata`), or undefined. */
export function contextOfTraceMetadata(metadata: string | undefined): Context | undefined {
  if (!metadata || !tracingEnabled()) return undefined;
  try {
    const ctx = propagation.extract(ROOT_CONTEXT, JSON.parse(metadata) as Record<string, string>);
    return trace.getSpanContext(ctx) ? ctx : undefined;
  } catch {
    return undefined;
  }
}

/**
 * A span started now and ended by the caller (one that hooks open and close, such as an HTTP
 * request's), with the context that makes it the parent; undefined with tracing off.
 */
export function startSpan(name: string, options: Omit<SpanOptions, 'errorOnThrow'>): { span: Span; context: Context } | undefined {
  if (!tracingEnabled()) return undefined;
  const parent = options.parent ?? context.active();
  const span = trace.getTracer(TRACER_NAME).startSpan(
    name,
    {
      kind: options.kind ?? SpanKind.INTERNAL,
      ...(options.attributes ? { attributes: options.attributes } : {}),
      ...(options.startTimeMs !== undefined ? { startTime: options.startTimeMs } : {}),
    },
    parent,
  );
  return { span, context: trace.setSpan(parent, span) };
}

/** Runs `fn` with `ctx` as the active context (what `startSpan` answered). */
export function withContext<T>(ctx: Context, fn: () => T): T {
  return context.with(ctx, fn);
}

/** Marks a span an error with a short message (an HTTP 5xx, a callback not delivered). */
export function markSpanError(span: Span, message: string): void {
  span.setStatus({ code: SpanStatusCode.ERROR, message });
}
