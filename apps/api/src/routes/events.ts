import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { z } from 'zod';
import { LaneNameSchema, StreamIdSchema } from '@lanes/contracts';
import { ApiError, notFound } from '../api-error.js';
import { inScope as principalInScope, type Principal } from '../edge/principal.js';
import { CardOutput, type CardStore } from '@lanes/queue';
import { EventFanout } from '../sse/event-fanout.js';
import { parseResumeRequest } from '../sse/resume-request.js';
import { OutputFanout } from '../sse/output-fanout.js';
import { cardOutputRoute } from './card-output.js';
import { DEFAULT_SSE_STREAM_CONFIG, SseStream, type SseStreamConfig } from '../sse/sse-stream.js';
import { DEFAULT_STREAM_CAPS_CONFIG, evaluateStreamAdmission, type StreamCapsConfig } from '../sse/stream-admission.js';
import { StreamTally } from '../sse/stream-tally.js';

/** `GET /v1/events` options; every limit has a named default. */
export interface EventStreamOptions {
  caps?: Partial<StreamCapsConfig>;
  stream?: Partial<SseStreamConfig>;
  /** Who holds a stream, for the per-principal cap: by default the token's name (never its value). */
  principalOf?: (request: FastifyRequest) => string;
  /** The lanes a request may see events of. Default: the token's lanes. */
  laneFilter?: (request: FastifyRequest) => (lane: string) => boolean;
}

export interface EventRoutesDeps extends EventStreamOptions {
  redis: Redis;
  log: Logger;
  /** For `GET /v1/cards/:id/output` (card-output.ts): the card's lane and state. */
  store: CardStore;
}

/** What the event routes serve right now. */
export interface EventStreamStats {
  /** Streams open (counted against the caps): `/v1/events` and card output streams together. */
  open(): number;
  /** Streams dropped as slow consumers since start. */
  dropped(): number;
  /** Gaps told on event and output streams since start (event-fanout.ts, output-fanout.ts). */
  gaps(): number;
}

const EventsQuerySchema = z.object({ since: StreamIdSchema.optional(), lane: LaneNameSchema.optional() });

/** `?since=` and `Last-Event-ID` (which wins, as browsers send it on reconnect), validated. */
function parseRequest(request: FastifyRequest): { since: string | undefined; lane: string | undefined } {
  const { query, lastEventId } = parseResumeRequest(request, EventsQuerySchema);
  return { since: lastEventId ?? query.since, lane: query.lane };
}

/**
 * Server-sent card and sandbox events. `Last-Event-ID` (or `?since=`) resumes; otherwise the stream
 * starts with new events. One reader per process (`EventFanout`) feeds every stream, so streams cost
 * sockets and memory, not Redis connections; both are capped.
 */
export function eventRoutes(app: FastifyInstance, deps: EventRoutesDeps): EventStreamStats {
  const caps: StreamCapsConfig = { ...DEFAULT_STREAM_CAPS_CONFIG, ...deps.caps };
  const streamConfig: SseStreamConfig = { ...DEFAULT_SSE_STREAM_CONFIG, ...deps.stream };
  const principalOf = deps.principalOf ?? ((request: FastifyRequest) => request.principal?.name ?? 'anonymous');
  const fanout = new EventFanout({ redis: deps.redis, log: deps.log.child({ component: 'sse' }) });
  const tally = new StreamTally();
  const streams = new Set<SseStream>();
  let dropped = 0;

  const outputFanout = new OutputFanout({ redis: deps.redis, log: deps.log.child({ component: 'sse-output' }) });

  /** Counts one more stream of this request's principal, or refuses it (429) over a cap. */
  const admit = (request: FastifyRequest): string => {
    const principal = principalOf(request);
    // Checked and counted with no await between, so concurrent opens cannot pass the caps together.
    const admission = evaluateStreamAdmission(tally.snapshot(principal), caps);
    switch (admission.action) {
      case 'refuse':
        request.log.info({ principal, reason: admission.reason, limit: admission.limit }, 'sse.refused');
        throw new ApiError(
          429,
          'TOO_MANY_STREAMS',
          admission.reason === 'principal-cap'
            ? `this token holds ${admission.limit} event streams, the most it may`
            : `this server holds ${admission.limit} event streams, the most it may`,
        );
      case 'admit':
        break;
    }
    tally.open(principal);
    return principal;
  };

  app.get('/v1/events', async (request, reply) => {
    const { since, lane } = parseRequest(request);
    // A lane outside the token's scope answers as an unknown one; unfiltered, the stream holds only in-scope lanes.
    if (lane !== undefined && !principalInScope(request.principal, lane)) throw notFound(`lane ${lane}`);
    const principal = admit(request);
    const inScope = deps.laneFilter?.(request) ?? ((l: string) => principalInScope(request.principal, l));
    const accepts = (l: string) => (lane === undefined || l === lane) && inScope(l);
    const stream = new SseStream(reply.raw, accepts, streamConfig, {
      onEnd: (reason, resumeId) => {
        fanout.detach(stream);
        if (reason === 'slow-consumer') {
          dropped++;
          request.log.warn({ principal, resumeId }, 'sse.dropped');
        }
      },
      onClose: () => {
        streams.delete(stream);
        tally.release(principal);
      },
    });
    streams.add(stream);
    try {
      // Before any byte is sent: a Redis that cannot be read answers 503 through the error handler.
      await fanout.start();
    } catch (err) {
      stream.discard();
      throw err;
    }
    if (!stream.isOpen) throw new ApiError(503, 'SERVER_CLOSING', 'the server is closing; reconnect shortly');
    reply.hijack();
    try {
      await fanout.attach(stream, since, replayLanes(request.principal, lane, deps.laneFilter !== undefined));
    } catch (err) {
      request.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sse.catch_up_failed');
      stream.end('redis-unavailable');
    }
  });

  cardOutputRoute(app, {
    store: deps.store,
    output: new CardOutput(deps.redis),
    fanout: outputFanout,
    admit,
    streamConfig,
    track: (stream) => streams.add(stream),
    closed: (stream, principal) => {
      streams.delete(stream);
      tally.release(principal);
    },
    dropped: () => {
      dropped++;
    },
  });

  // Streams never end by themselves: closing the server ends each with its resume id, then stops the reader.
  app.addHook('preClose', async () => {
    for (const stream of streams) stream.end('server-closing');
  });
  app.addHook('onClose', async () => {
    await fanout.stop();
    await outputFanout.stop();
  });

  return { open: () => tally.total, dropped: () => dropped, gaps: () => fanout.gapsTold + outputFanout.gapsTold };
}

/**
 * The lanes whose own event streams a replay may fall back to (event-fanout.ts): the one asked
 * for, else the token's, when they are a known few. Every lane (an admin unfiltered), or a custom
 * lane filter the set cannot name, replays from the shared stream alone.
 */
export function replayLanes(principal: Principal, lane: string | undefined, customFilter: boolean): ReadonlySet<string> | undefined {
  if (customFilter) return undefined;
  if (lane !== undefined) return new Set([lane]);
  return principal.lanes === '*' ? undefined : principal.lanes;
}
