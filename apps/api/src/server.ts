import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { CardValidationError, type CallbackAllowRule, type ErrorBody, type LaneConfig } from '@lanes/contracts';
import { CardStore, FleetStore, LaneQueues } from '@lanes/queue';
import { ApiError } from './api-error.js';
import { createAuthHook } from './auth.js';
import { registerBoard } from './board.js';
import { createMetrics } from './metrics.js';
import { RedisFullWatch } from './redis-full.js';
import { cardRoutes } from './routes/cards.js';
import { eventRoutes } from './routes/events.js';
import { healthRoutes } from './routes/health.js';
import { laneRoutes } from './routes/lanes.js';
import { statusPageRoutes } from './status-page/status-page.js';

/** Bulk posts of large prompts fit; anything bigger is refused with 413. */
export const BODY_LIMIT_BYTES = 16 * 1024 * 1024;

export interface ApiOptions {
  redis: Redis;
  lanes: readonly LaneConfig[];
  log: Logger;
  tokens?: readonly string[];
  now?: () => number;
  newId?: () => string;
  /** LANES_CALLBACK_ALLOW: inward callback targets a card may name. */
  callbackAllow?: readonly CallbackAllowRule[];
  /** LANES_BOARD_READONLY: Bull Board shows but changes nothing. */
  boardReadOnly?: boolean;
  /** How long one OOM refusal keeps /readyz at 503; DEFAULT_REDIS_FULL_READY_WINDOW_MS unless given (tests give less). */
  redisFullReadyWindowMs?: number;
}

export interface ApiServer {
  app: FastifyInstance;
  queues: LaneQueues;
  close(): Promise<void>;
}

function errorBody(code: string, message: string, issues?: ErrorBody['error']['issues']): ErrorBody {
  return { error: { code, message, ...(issues?.length ? { issues } : {}) } };
}

/** The board-facing HTTP API, with Bull Board, metrics and health. */
export async function createApiServer(options: ApiOptions): Promise<ApiServer> {
  const now = options.now ?? Date.now;
  const { redis, lanes } = options;
  const store = new CardStore({ redis, now, log: options.log, lanes });
  const fleet = new FleetStore(redis);
  const queues = new LaneQueues({ redis, store, lanes, now, onError: (err) => options.log.warn({ err: err.message }, 'queue connection error') });
  const app = Fastify({
    loggerInstance: options.log.child({ component: 'api' }) as FastifyBaseLogger,
    bodyLimit: BODY_LIMIT_BYTES,
    forceCloseConnections: true,
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
    if (redis.status !== 'ready') {
      return reply.code(503).send(errorBody('REDIS_UNAVAILABLE', `redis is ${redis.status}; retry shortly`));
    }
    reply.log.error({ err }, 'request failed');
    return reply.code(500).send(errorBody('INTERNAL', 'internal error'));
  });
  app.setNotFoundHandler((request, reply) => reply.code(404).send(errorBody('NOT_FOUND', `no route ${request.method} ${request.url.split('?')[0]}`)));
  app.addHook('onRequest', createAuthHook(options.tokens ?? []));

  const statusDeps = { queues, store, fleet, lanes };
  const metrics = createMetrics(statusDeps);
  healthRoutes(app, { full });
  cardRoutes(app, { queues, store, ...(options.newId ? { newId: options.newId } : {}), ...(options.callbackAllow ? { callbackAllow: options.callbackAllow } : {}) });
  laneRoutes(app, { ...statusDeps, redis });
  eventRoutes(app, { redis });
  statusPageRoutes(app);
  app.get('/metrics', async (_request, reply) => {
    return reply.type(metrics.registry.contentType).send(await metrics.exposition());
  });
  await registerBoard(app, queues.all(), { readOnly: options.boardReadOnly === true });
  await app.ready();

  return {
    app,
    queues,
    async close() {
      await app.close();
      await queues.close();
    },
  };
}
