import { once } from 'node:events';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { ApiLimits, ApiServer, EventStreamOptions } from '@lanes/api';
import { laneCallbackSecrets, type ApiTokenConfig, type CallbackAllowRule, type LaneConfig, type LaneIsolation } from '@lanes/contracts';
import { createRedis } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import type { CallbackConcurrencyConfig, CallbackLookup, SupervisorApp } from '@lanes/supervisor';
import type { WorkerApp } from '@lanes/worker';
import { startHealthServer, type HealthServer } from './health-server.js';

export interface StackOptions {
  redisUrl: string;
  lanes: readonly LaneConfig[];
  log: Logger;
  providerFor: (lane: LaneConfig) => SandboxProvider;
  /** How each lane's agents are fenced (ProviderRegistry.isolation); reported at boot and in GET /v1/lanes. */
  isolationOf?: (lane: LaneConfig) => LaneIsolation;
  /** Every provider the supervisor may reap orphans from. */
  providers: readonly SandboxProvider[];
  filesBaseDir?: string;
  port?: number;
  host?: string;
  /** LANES_API_TOKENS: admin tokens over every lane. */
  tokens?: readonly string[];
  /** The config file's scoped `tokens`; `fromEnv` ones are read from `tokenEnv` (default process.env). */
  scopedTokens?: readonly ApiTokenConfig[];
  /** Where the config's `fromEnv` values are read: scoped tokens, and lanes' callback secrets. Default process.env. */
  tokenEnv?: Record<string, string | undefined>;
  /** The API's timeouts; unset ones take their DEFAULT_API_* defaults. */
  apiLimits?: Partial<ApiLimits>;
  /** LANES_BOARD_READONLY: Bull Board shows the queues but refuses changes. */
  boardReadOnly?: boolean;
  /** `GET /v1/events` limits (LANES_SSE_MAX_STREAMS, LANES_SSE_MAX_STREAMS_PER_TOKEN) and scoping. */
  events?: EventStreamOptions;
  heartbeatIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  lockDurationMs?: number;
  /** Card callbacks are delivered by the supervisor; `secret` (and during a rotation `previousSecret`) signs them. */
  callbacks?: {
    secret?: string;
    previousSecret?: string;
    retry?: { maxAttempts: number; baseDelayMs: number };
    concurrency?: CallbackConcurrencyConfig;
    lookup?: CallbackLookup;
  };
  /** LANES_CALLBACK_ALLOW: inward callback targets allowed, at enqueue (API) and at delivery (supervisor). */
  callbackAllow?: readonly CallbackAllowRule[];
  /** Serve probes (/healthz, /readyz) on this port; 0 picks a free one. Unset: none. The worker's readiness when it runs, else the supervisor's. */
  healthPort?: number;
  /** Run only some parts (a worker container runs only the worker). */
  parts?: { api?: boolean; worker?: boolean; supervisor?: boolean };
}

export interface Stack {
  api?: ApiServer;
  worker?: WorkerApp;
  supervisor?: SupervisorApp;
  /** http://host:port when the API runs. */
  url?: string;
  /** The probes' port, when served. */
  healthPort?: number;
  stop(): Promise<void>;
}

/** The composition root: API, worker and supervisor over one Redis, each optional. */
export async function startStack(options: StackOptions): Promise<Stack> {
  const parts = { api: true, worker: true, supervisor: true, ...options.parts };
  // Read before anything starts: a lane's callback secret that is unset stops the boot, naming its field.
  const laneSecrets = parts.supervisor ? laneCallbackSecrets(options.lanes, options.tokenEnv ?? process.env) : undefined;
  // Only the parts that run are loaded, all at once: a worker container loads neither the API's
  // server and Bull Board nor the supervisor, and starts that much sooner (bench/worker-boot.ts).
  const [apiModule, workerModule, supervisorModule] = await Promise.all([
    parts.api ? import('@lanes/api') : undefined,
    parts.worker ? import('@lanes/worker') : undefined,
    parts.supervisor ? import('@lanes/supervisor') : undefined,
  ]);
  const redis = createRedis(options.redisUrl);
  redis.on('error', (err) => options.log.warn({ err: err.message }, 'redis connection error'));
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? (options.heartbeatIntervalMs ? 2 * options.heartbeatIntervalMs : undefined);
  const stack: Stack = { stop: async () => undefined };
  let apiRedis: Redis | undefined;
  let health: HealthServer | undefined;
  let supervisorRunning = false;

  stack.stop = async () => {
    supervisorRunning = false;
    // API first (stop taking cards), then the worker hands its cards back, then the supervisor.
    if (stack.api) await stack.api.close();
    if (stack.worker) await stack.worker.stop();
    if (stack.supervisor) await stack.supervisor.stop();
    await Promise.all(options.providers.map((p) => p.close()));
    // Last: a draining worker answers /readyz with 503 until it is gone.
    if (health) await health.close();
    await redis.quit().catch(() => redis.disconnect());
    if (apiRedis) await apiRedis.quit().catch(() => apiRedis!.disconnect());
  };
  try {
    if (apiModule) {
      // The API fails fast while Redis is away (503), instead of holding requests in an offline queue.
      apiRedis = createRedis(options.redisUrl, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
      apiRedis.on('error', () => undefined); // readyz and the error handler report it
      await once(apiRedis, 'ready');
      stack.api = await apiModule.createApiServer({
        redis: apiRedis,
        lanes: options.lanes,
        log: options.log,
        tokens: options.tokens ?? [],
        ...(options.scopedTokens ? { scopedTokens: options.scopedTokens } : {}),
        ...(options.tokenEnv ? { tokenEnv: options.tokenEnv } : {}),
        ...(options.apiLimits ? { limits: options.apiLimits } : {}),
        ...(options.boardReadOnly ? { boardReadOnly: true } : {}),
        ...(options.events ? { events: options.events } : {}),
        ...(options.callbackAllow ? { callbackAllow: options.callbackAllow } : {}),
      });
      const host = options.host ?? '127.0.0.1';
      await stack.api.listen({ port: options.port ?? 0, host });
      const addr = stack.api.app.server.address();
      const port = typeof addr === 'object' && addr ? addr.port : options.port;
      stack.url = `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`;
    }

    if (workerModule) {
      stack.worker = workerModule.createWorkerApp({
        lanes: options.lanes,
        redis,
        log: options.log,
        providerFor: options.providerFor,
        ...(options.isolationOf ? { isolationOf: options.isolationOf } : {}),
        ...(options.filesBaseDir ? { filesBaseDir: options.filesBaseDir } : {}),
        ...(options.heartbeatIntervalMs ? { heartbeatIntervalMs: options.heartbeatIntervalMs } : {}),
        ...(options.lockDurationMs ? { lockDurationMs: options.lockDurationMs } : {}),
      });
      await stack.worker.start();
      if (options.healthPort !== undefined) {
        const worker = stack.worker;
        health = await startHealthServer({ port: options.healthPort, readiness: () => worker.readiness() });
        stack.healthPort = health.port;
      }
    }
    if (supervisorModule) {
      stack.supervisor = supervisorModule.createSupervisorApp({
        redis,
        lanes: options.lanes,
        log: options.log,
        providers: options.providers,
        ...(options.heartbeatIntervalMs ? { sweepIntervalMs: options.heartbeatIntervalMs / 2 } : {}),
        ...(heartbeatTimeoutMs ? { heartbeatTimeoutMs } : {}),
        ...(options.lockDurationMs ? { lockDurationMs: options.lockDurationMs } : {}),
        callbacks: {
          ...options.callbacks,
          ...(laneSecrets?.size ? { laneSecrets } : {}),
          ...(options.callbackAllow ? { allow: options.callbackAllow } : {}),
        },
      });
      await stack.supervisor.start();
      supervisorRunning = true;
      // A supervisor without a worker (a `lanes supervisor` container) serves probes of its own:
      // /healthz while the process answers, /readyz while it runs (started, not stopping).
      if (options.healthPort !== undefined && !health) {
        health = await startHealthServer({
          port: options.healthPort,
          readiness: () => (supervisorRunning ? { ready: true, reason: 'supervisor is running' } : { ready: false, reason: 'supervisor is stopping' }),
        });
        stack.healthPort = health.port;
      }
    }
  } catch (err) {
    // A part that failed to start (a port in use, say) must not leave the others running.
    await stack.stop().catch(() => undefined);
    throw err;
  }
  return stack;
}
