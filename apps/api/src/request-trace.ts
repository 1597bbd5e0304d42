import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Card } from '@lanes/contracts';
import { SpanKind, contextOfHeaders, inSpan, markSpanError, startSpan, tracingEnabled, withContext, type Context, type Span } from '@lanes/tracing';

/** The routes that open a card's trace: a board's POST of cards is where the trace begins. */
const TRACED_ROUTES = new Set(['POST /v1/cards']);

const open = new WeakMap<FastifyRequest, { span: Span; context: Context }>();

/**
 * With tracing on, a SERVER span per traced request (`POST /v1/cards`), continuing the board's
 * own trace when its request carries a `traceparent` header, else a new trace. Opened after the
 * edge and auth hooks (a refused request has no span) and ended with the response. Its attributes
 * are the method, route and status: no header, token or body goes in it. With tracing off no hook
 * is added.
 */
export function registerRequestTracing(app: FastifyInstance): void {
  if (!tracingEnabled()) return;
  app.addHook('onRequest', async (request) => {
    const route = `${request.method} ${request.routeOptions.url ?? ''}`;
    if (!TRACED_ROUTES.has(route)) return;
    const started = startSpan(route, {
      kind: SpanKind.SERVER,
      parent: contextOfHeaders(request.headers),
      attributes: { 'http.request.method': request.method, 'http.route': request.routeOptions.url ?? '' },
    });
    if (started) open.set(request, started);
  });
  const end = (request: FastifyRequest, status: number | undefined) => {
    const started = open.get(request);
    if (!started) return;
    open.delete(request);
    if (status !== undefined) started.span.setAttribute('http.response.status_code', status);
    if (status === undefined || status >= 500) markSpanError(started.span, status === undefined ? 'request aborted' : `HTTP ${status}`);
    started.span.end();
  };
  app.addHook('onResponse', async (request, reply) => end(request, reply.statusCode));
  app.addHook('onRequestAbort', async (request) => end(request, undefined));
}

/**
 * Runs the enqueue of a request's cards in a `cards.enqueue` span under the request's: the jobs
 * take this span as their trace (job-trace.ts in @lanes/queue), so each card's run, result and
 * callback join the trace the POST opened. The cards of one bulk POST share that one trace.
 */
export function inEnqueueSpan<T>(request: FastifyRequest, cards: readonly Card[], fn: () => Promise<T>): Promise<T> {
  const started = open.get(request);
  if (!started) return fn();
  const attributes = { 'lanes.card.count': cards.length, 'lanes.card.ids': cards.map((c) => c.id), 'lanes.lanes': [...new Set(cards.map((c) => c.lane))] };
  return withContext(started.context, () => inSpan('cards.enqueue', { attributes }, fn));
}
