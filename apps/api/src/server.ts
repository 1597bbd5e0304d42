import { STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { CardValidationError, ConfigError, defaults, type ApiTokenConfig, type CallbackAllowRule, type LaneConfig } from '@lanes/contracts';
import { CardOutput, CardStore, FleetStore, LaneQueues } from '@lanes/queue';
import { ApiError, errorBody } from './api-error.js';
import { warmCardValidation } from './validation-warmup.js';
import { createAuthHook, createEdgeHook, createRequestRateHook } from './auth.js';
import { RequestRateLimiter } from './edge/request-rate.js';
import { registerBoard } from './board.js';
import { compileApiTokens } from './edge/api-tokens.js';
import { CardRateLimiter } from './edge/card-rate.js';
import { evaluateBind } from './edge/browser-edge.js';
import type { Principal } from './edge/principal.js';
import { createMetrics } from './metrics.js';
import { RedisFullWatch } from './redis-full.js';
import { redisUnavailable } from './redis-unavailable.js';
import { cardRoutes } from './routes/cards.js';
import { eventRoutes, type EventStreamOptions, type EventStreamStats } from './routes/events.js';
import { healthRoutes } from './routes/health.js';
import { laneRoutes } from './routes/lanes.js';
import { statusPageRoutes } from './status-page/status-page.js';
import { registerRequestTracing } from './request-trace.js';

/** Bulk posts of large prompts fit; anything bigger is refused with 413. */
export const BODY_LIMIT_BYTES = 16 * 1024 * 1024;

export interface ApiOptions {
  redis: Redis;
  lanes: readonly LaneConfig[];
  log: Logger;
  /** LANES_API_TOKENS: admin tokens over every lane. */
  tokens?: readonly string[];
  /** The config file's `tokens`: scoped by lanes and role. */
  scopedTokens?: readonly ApiTokenConfig[];
  /** Where `fromEnv` tokens are read; default process.env. */
  tokenEnv?: Record<string, string | undefined>;
  /** The edge's timeouts; each defaults to its DEFAULT_API_* in @lanes/contracts defaults. */
  limits?: Partial<ApiLimits>;
  now?: () => number;
  newId?: () => string;
  /** LANES_CALLBACK_ALLOW: inward callback targets a card may name. */
  callbackAllow?: readonly CallbackAllowRule[];
  /** LANES_BOARD_READONLY: Bull Board shows but changes nothing. */
  boardReadOnly?: boolean;
  /** `GET /v1/events`: stream caps, buffer cap, keepalive, and whom a stream counts against. */
  events?: EventStreamOptions;
  /** How long one OOM refusal keeps /readyz at 503; DEFAULT_REDIS_FULL_READY_WINDOW_MS unless given (tests give less). */
  redisFullReadyWindowMs?: number;
  /** Callbacks one lane may owe before its cards with a callbackUrl are refused; DEFAULT_LANE_CALLBACK_BACKLOG_MAX unless given (tests give less). */
  laneCallbackBacklogMax?: number;
}

/** The edge's timeouts (README, HTTP API: Limits). */
export interface ApiLimits {
  requestTimeoutMs: number;
  connectionTimeoutMs: number;
  keepAliveTimeoutMs: number;
}

export const DEFAULT_API_LIMITS: ApiLimits = {
  requestTimeoutMs: defaults.DEFAULT_API_REQUEST_TIMEOUT_MS,
  connectionTimeoutMs: defaults.DEFAULT_API_CONNECTION_TIMEOUT_MS,
  keepAliveTimeoutMs: defaults.DEFAULT_API_KEEP_ALIVE_TIMEOUT_MS,
};

/** Node's default deadline for a request's headers. */
const NODE_HEADERS_TIMEOUT_MS = 60_000;

export interface ApiServer {
  app: FastifyInstance;
  queues: LaneQueues;
  /** No tokens configured: loopback Host names only, and listen() binds loopback only. */
  open: boolean;
  /** Listens, refusing (ConfigError naming LANES_HOST) a non-loopback address in open mode. */
  listen(options: { port: number; host: string }): Promise<void>;
  /** The SSE streams open and dropped. */
  events: EventStreamStats;
  close(): Promise<void>;
}

/** The board-facing HTTP API, with Bull Board, metrics and health. */
export async function createApiServer(options: ApiOptions): Promise<ApiServer> {
  const now = options.now ?? Date.now;
  const { redis, lanes } = options;
  warmCardValidation(lanes);
  const store = new CardStore({ redis, now, log: options.log, lanes });
  const fleet = new FleetStore(redis);
  const queues = new LaneQueues({
    redis,
    store,
    lanes,
    now,
    ...(options.laneCallbackBacklogMax !== undefined ? { laneCallbackBacklogMax: options.laneCallbackBacklogMax } : {}),
    onError: (err) => options.log.warn({ err: err.message }, 'queue connection error'),
  });
  const tokens = compileApiTokens(options.tokens ?? [], options.scopedTokens ?? [], options.tokenEnv ?? process.env);
  const open = tokens.length === 0;
  const limits = { ...DEFAULT_API_LIMITS, ...options.limits };
  const app = Fastify({
    loggerInstance: options.log.child({ component: 'api' }) as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    forceCloseConnections: true,
    requestTimeout: limits.requestTimeoutMs,
    connectionTimeout: limits.connectionTimeoutMs,
    keepAliveTimeout: limits.keepAliveTimeoutMs,
    // Node checks request deadlines on an interval (30 s by default); 4 checks per deadline cut a late request within 1.25× of it.
    // Node answers an incomplete request only if its header deadline is no later than the request's: keep Node's own 60 s, or less.
    http: {
      connectionsCheckingInterval: Math.max(1, Math.min(30_000, Math.floor(limits.requestTimeoutMs / 4))),
      headersTimeout: Math.min(NODE_HEADERS_TIMEOUT_MS, limits.requestTimeoutMs),
    },
    routerOptions: { maxParamLength: defaults.API_MAX_PARAM_LENGTH },
    // Node refuses a request that outlives requestTimeout (or a malformed one) before any route runs: answer in the API's shape.
    clientErrorHandler: (err: NodeJS.ErrnoException, socket: Socket) => {
      if (err.code === 'ECONNRESET' || socket.destroyed) return;
      const [status, code, message] =
        err.code === 'ERR_HTTP_REQUEST_TIMEOUT'
          ? [408, 'REQUEST_TIMEOUT', `the request did not arrive within ${limits.requestTimeoutMs} ms`]
          : err.code === 'HPE_HEADER_OVERFLOW'
            ? [431, 'HEADERS_TOO_LARGE', 'request headers too large']
            : [400, 'BAD_REQUEST', 'malformed request'];
      const body = JSON.stringify(errorBody(code, message));
      if (socket.writable)
        socket.write(
          `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
        );
      socket.destroy(err);
    },
  });
  app.decorateRequest('principal', null as unknown as Principal);
  // A mutation must say application/json (the edge hook); one with nothing to send (cancel) may send no body.
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    if (body === '') return done(null, undefined);
    return parseJson(request, body as string, done);
  });

  const full = new RedisFullWatch(redis, now, options.redisFullReadyWindowMs);
  app.setErrorHandler((err, _request, reply) => {
    if (err instanceof ApiError) return reply.code(err.statusCode).send(errorBody(err.code, err.message, err.issues));
    const redisFull = full.classify(err);
    if (redisFull) {
      reply.log.warn({ event: 'redis.full', err: redisFull.cause instanceof Error ? redisFull.cause.message : redisFull.message }, 'redis refused a write: maxmemory reached');
      return reply.code(503).send(errorBody(redisFull.code, redisFull.message));
    }
    if (err instanceof CardValidationError) return reply.code(400).send(errorBody(err.code, err.message, err.issues));
    const fe = err as { statusCode?: number; code?: string; message?: string };
    if (fe.statusCode && fe.statusCode < 500) {
      return reply.code(fe.statusCode).send(errorBody(fe.code ?? 'BAD_REQUEST', fe.message ?? 'bad request'));
    }
    const unavailable = redisUnavailable(redis);
    if (unavailable) return reply.code(503).send(errorBody('REDIS_UNAVAILABLE', `${unavailable}; retry shortly`));
    reply.log.error({ err }, 'request failed');
    return reply.code(500).send(errorBody('INTERNAL', 'internal error'));
  });
  app.setNotFoundHandler((request, reply) => reply.code(404).send(errorBody('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`)));
  app.addHook('onRequest', createEdgeHook({ open }));
  app.addHook('onRequest', createAuthHook(tokens));
  const requestRate = new RequestRateLimiter(now);
  app.addHook('onRequest', createRequestRateHook(requestRate));
  registerRequestTracing(app);

  const statusDeps = { queues, store, fleet, lanes };
  healthRoutes(app, { full });
  cardRoutes(app, {
    queues,
    store,
    output: new CardOutput(redis),
    ...(options.newId ? { newId: options.newId } : {}),
    ...(options.callbackAllow ? { callbackAllow: options.callbackAllow } : {}),
    // Redis's clock unless the caller gave one: API processes share the buckets.
    cardRate: new CardRateLimiter(redis, options.now),
    bodyLimitBytes: BODY_LIMIT_BYTES,
  });
  laneRoutes(app, { ...statusDeps, redis });
  const events = eventRoutes(app, { redis, store, log: options.log, ...options.events });
  const metrics = createMetrics(statusDeps, events, requestRate);
  statusPageRoutes(app);
  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.registry.contentType).send(await metrics.exposition());
  });
  await registerBoard(app, queues.all(), { readOnly: options.boardReadOnly === true });
  await app.ready();

  return {
    app,
    queues,
    open,
    async listen({ port, host }) {
      const bind = evaluateBind(host, { open });
      if (bind.action === 'refuse') throw new ConfigError([{ path: 'LANES_HOST', message: bind.reason }], 'environment');
      await app.listen({ port, host });
    },
    events,
    async close() {
      await app.close();
      await queues.close();
    },
  };
}
