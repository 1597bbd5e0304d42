import type { Redis } from 'ioredis';
import { cardTrace } from '@lanes/queue';
import { SpanKind, contextOfTraceparent, inSpan, markSpanError, traceparentOf, type Span } from '@lanes/tracing';
import type { CallbackDecision } from './callback-policy.js';

/** The W3C header a delivery carries while tracing is on: a board that traces joins the card's trace. */
export const TRACEPARENT_HEADER = 'traceparent';

/**
 * One callback delivery (every try of it) as a `card.callback` CLIENT span, under the run's trace
 * the worker noted on the card (job-trace.ts in @lanes/queue), or a new trace where none was noted
 * (a card cancelled before it ran). Its attributes name the card, the event and the delivery id,
 * and the board's origin only: a callbackUrl's path or query may hold a board's token, and the
 * signing secrets never go near a span. With tracing off: no read, no span.
 */
export async function inCallbackSpan<T>(
  redis: Redis,
  held: { cardId: string; id: string; event: { type: string }; url: URL },
  fn: (span: Span | undefined) => Promise<T>,
): Promise<T> {
  const parent = contextOfTraceparent(await cardTrace(redis, held.cardId));
  const attributes = { 'lanes.card.id': held.cardId, 'lanes.event': held.event.type, 'lanes.delivery.id': held.id, 'server.address': held.url.hostname };
  return inSpan('card.callback', { kind: SpanKind.CLIENT, attributes, ...(parent ? { parent } : {}) }, fn);
}

/** The delivery's headers with its span's traceparent; unchanged without a span. */
export function traceHeaders(headers: Record<string, string>, span: Span | undefined): Record<string, string> {
  const traceparent = traceparentOf(span);
  if (traceparent !== undefined) headers[TRACEPARENT_HEADER] = traceparent;
  return headers;
}

/** One try of the delivery: an event on the span, and on the last try its outcome. */
export function noteCallbackAttempt(span: Span | undefined, attempt: number, result: { status?: number; error?: string }, decision: CallbackDecision): void {
  if (!span) return;
  span.addEvent('callback.attempt', { attempt, ...(result.status !== undefined ? { 'http.response.status_code': result.status } : {}), decision: decision.action });
  if (decision.action === 'retry') return;
  span.setAttributes({
    'lanes.callback.attempts': attempt,
    'lanes.callback.outcome': decision.action,
    ...(result.status !== undefined ? { 'http.response.status_code': result.status } : {}),
  });
  if (decision.action === 'give-up') markSpanError(span, decision.reason);
}

/** The delivery's log fields for its trace: `trace_id` while tracing is on, nothing otherwise. */
export function traceLogFieldsOf(span: Span | undefined): { trace_id?: string } {
  return span ? { trace_id: span.spanContext().traceId } : {};
}
