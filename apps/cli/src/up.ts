import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import type { Logger } from 'pino';
import { parseEnv } from '@lanes/contracts';
import { redactRedisUrl } from '@lanes/queue';
import { createProviderRegistry } from '@lanes/sandbox';
import { startTracing } from '@lanes/tracing';
import { loadConfig } from './config-load.js';
import { checkProviderCredentials } from './provider-check.js';
import { STATE_DIR } from './paths.js';
import { redisDataDir, resolveRedis } from './redis-resolve.js';
import { startStack, type Stack, type StackOptions } from './stack.js';

export interface UpOptions {
  config?: string;
  port?: number;
  parts?: StackOptions['parts'];
}

/** `lanes up` (all parts) and the single-part container commands. Resolves when the process should exit. */
export async function up(options: UpOptions, env: NodeJS.ProcessEnv, log: Logger, print: (s: string) => void): Promise<number> {
  const settings = parseEnv(env);
  const { config, baseDir, source } = loadConfig(options.config ?? settings.LANES_CONFIG, {});
  // Only workers and supervisors reach a provider: an API-only process holds no Modal credentials.
  const parts = { api: true, worker: true, supervisor: true, ...options.parts };
  const usesProviders = parts.worker || parts.supervisor;
  if (usesProviders) checkProviderCredentials(config, settings, existsSync(join(homedir(), '.modal.toml')));
  // Before any part is built: queues and workers take BullMQ's telemetry option only with tracing on.
  const tracing = await startTracing({
    env,
    serviceName: serviceNameOf(parts),
    onShutdownError: (err) => log.warn({ event: 'tracing.flush-failed', err: String(err) }, 'the last spans could not be exported'),
    // While it runs: a batch the collector did not take, spans dropped from a full queue.
    onSdkMessage: (sdkLevel, message) => log.warn({ event: 'tracing.sdk', sdkLevel, err: message }, 'OpenTelemetry SDK reported a problem; spans may be lost'),
  });
  if (tracing.enabled) log.info({ event: 'tracing.started' }, 'OpenTelemetry traces are exported over OTLP (OTEL_EXPORTER_OTLP_ENDPOINT)');
  const redis = await resolveRedis(settings.redis, redisDataDir(STATE_DIR));
  // Only the API reads tokens; a process without it does not load it (stack.ts).
  const tokens = parts.api ? (await import('@lanes/api')).parseTokens(settings.LANES_API_TOKENS) : [];
  // An API-only process builds no provider (it reads lanes' isolation only), so it loads no SDK.
  const providers = await createProviderRegistry({ sandboxDir: settings.LANES_SANDBOX_DIR ?? join(STATE_DIR, 'sandboxes'), env, log, lanes: usesProviders ? config.lanes : [] });
  const port = options.port ?? settings.LANES_PORT;
  const scopedTokens = config.tokens ?? [];
  // Open (no tokens) means local only: never listen beyond loopback without auth (the API refuses to).
  const host = settings.LANES_HOST ?? (tokens.length || scopedTokens.length ? '0.0.0.0' : '127.0.0.1');
  const lanes = config.lanes;
  let stack: Stack;
  try {
    stack = await startStack({
      redisUrl: redis.url,
      lanes,
      log,
      providerFor: (lane) => providers.forLane(lane),
      isolationOf: (lane) => providers.isolation(lane),
      providers: usesProviders ? providers.all(lanes) : [],
      filesBaseDir: baseDir,
      port,
      host,
      tokens,
      scopedTokens,
      tokenEnv: env,
      ...(settings.LANES_BOARD_READONLY ? { boardReadOnly: true } : {}),
      events: { caps: { maxStreamsTotal: settings.LANES_SSE_MAX_STREAMS, maxStreamsPerPrincipal: settings.LANES_SSE_MAX_STREAMS_PER_TOKEN } },
      heartbeatIntervalMs: settings.LANES_HEARTBEAT_INTERVAL_MS,
      callbacks: {
        ...(settings.LANES_CALLBACK_SECRET ? { secret: settings.LANES_CALLBACK_SECRET } : {}),
        ...(settings.LANES_CALLBACK_SECRET_PREVIOUS ? { previousSecret: settings.LANES_CALLBACK_SECRET_PREVIOUS } : {}),
      },
      ...(settings.LANES_CALLBACK_ALLOW ? { callbackAllow: settings.LANES_CALLBACK_ALLOW } : {}),
      ...(settings.LANES_HEALTH_PORT !== undefined ? { healthPort: settings.LANES_HEALTH_PORT } : {}),
      ...(settings.LANES_LOCK_DURATION_MS ? { lockDurationMs: settings.LANES_LOCK_DURATION_MS } : {}),
      ...(options.parts ? { parts: options.parts } : {}),
    });
  } catch (err) {
    await redis.stop();
    await tracing.shutdown();
    throw err;
  }
  log.info({ event: 'stack.started', config: source, redis: redactRedisUrl(redis.url), redisSource: redis.source, url: stack.url }, 'lanes is up');
  if (stack.url) {
    const lane = lanes[0]!.name;
    const auth = tokens.length || scopedTokens.length ? ` -H 'authorization: Bearer $TOKEN'` : '';
    print(
      [
        '',
        `lanes is up (${source}; Redis: ${redis.source} ${redactRedisUrl(redis.url)})`,
        `  status page  ${stack.url}/`,
        `  API          ${stack.url}/v1/lanes`,
        `  Bull Board   ${stack.url}/admin/queues`,
        `  metrics      ${stack.url}/metrics`,
        `  events       ${stack.url}/v1/events`,
        '',
        'Post a card:',
        `  curl -s -X POST ${stack.url}/v1/cards -H 'content-type: application/json'${auth} \\`,
        `    -d '{"lane":"${lane}","title":"Fix flaky test","pr":{"number":12,"branch":"fix/flaky","base":"main"}}'`,
        '',
      ].join('\n'),
    );
  }
  await new Promise<void>((resolve) => {
    const shutdown = (signal: string) => {
      log.info({ event: 'stack.stopping', signal }, 'shutting down: handing running cards back');
      resolve();
    };
    process.once('SIGINT', shutdown);
    process.once('SIGTERM', shutdown);
  });
  await stack.stop();
  await redis.stop();
  // Last: the stop's own spans (cards handed back) are flushed too.
  await tracing.shutdown();
  return 0;
}

/** service.name unless OTEL_SERVICE_NAME says otherwise: `lanes` for the whole stack, else the parts this process runs. */
function serviceNameOf(parts: Required<NonNullable<StackOptions['parts']>>): string {
  const running = (['api', 'worker', 'supervisor'] as const).filter((p) => parts[p]);
  return running.length === 3 ? 'lanes' : `lanes-${running.join('-')}`;
}
