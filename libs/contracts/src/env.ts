import { z } from 'zod';
import * as D from './defaults.js';
import { parseAllowRule, type CallbackAllowRule } from './callback-target.js';
import { MIN_CALLBACK_SECRET_CHARS } from './callback-secret.js';
import { ConfigError } from './errors/config-error.js';
import type { ValidationIssue } from './errors/validation-issue.js';
import { parseRedisUrl, sentinelTargetFromEnv, type RedisTarget } from './redis-target.js';
import { toIssues } from './validation.js';

const Int = (min: number) => z.coerce.number().int().min(min);

/** Settings that come from the environment; validated once at boot, errors name the variable. */
export const LanesEnvSchema = z.object({
  /** One Redis (`redis://`, `rediss://`) or a Sentinel-managed one (`redis+sentinel://`, `rediss+sentinel://`; see redis-target.ts). */
  REDIS_URL: z.string().optional(),
  /** Sentinel-managed Redis without a URL: `host:port[,host:port…]` of the sentinels, with REDIS_SENTINEL_NAME. */
  REDIS_SENTINELS: z.string().optional(),
  /** The Sentinel group (`sentinel monitor <name> …`) whose primary lanes uses. */
  REDIS_SENTINEL_NAME: z.string().optional(),
  /** With REDIS_SENTINELS: the data nodes' ACL user and password (REDIS_URL carries its own as `user:pass@`). */
  REDIS_USERNAME: z.string().optional(),
  REDIS_PASSWORD: z.string().optional(),
  /** With REDIS_SENTINELS: the sentinels' own ACL user and password, when they ask for one. */
  REDIS_SENTINEL_USERNAME: z.string().optional(),
  REDIS_SENTINEL_PASSWORD: z.string().optional(),
  /** With REDIS_SENTINELS: `1` for TLS to the sentinels and the data nodes (REDIS_URL: `rediss+sentinel://`). */
  REDIS_TLS: z
    .enum(['0', '1', 'true', 'false'])
    .transform((v) => v === '1' || v === 'true')
    .optional(),
  /** With REDIS_SENTINELS: the database number (REDIS_URL: `?db=N`). Default 0. */
  REDIS_DB: z.string().optional(),
  LANES_CONFIG: z.string().min(1).optional(),
  LANES_PORT: Int(0).max(65_535).default(D.DEFAULT_API_PORT),
  LANES_HOST: z.string().min(1).optional(),
  LANES_API_TOKENS: z.string().optional(),
  LANES_LOG_LEVEL: z.enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']).default('info'),
  /** Unset: pretty lines when stdout is a terminal, JSON otherwise. */
  LANES_LOG_FORMAT: z.enum(['json', 'pretty']).optional(),
  LANES_SANDBOX_DIR: z.string().min(1).optional(),
  /** A worker container's probe port: GET /healthz (the process answers) and /readyz (running, heartbeats reach Redis). Unset: none. */
  LANES_HEALTH_PORT: Int(0).max(65_535).optional(),
  LANES_HEARTBEAT_INTERVAL_MS: Int(50).default(D.DEFAULT_HEARTBEAT_INTERVAL_MS),
  /** BullMQ lock and stalled-check interval; a crashed worker's cards move on within about 2× this. */
  LANES_LOCK_DURATION_MS: Int(1_000).optional(),
  /** Signs card callbacks (`x-lanes-signature: t=<unix s>,v1=<hmac>`), so a board can tell them from forgeries. */
  LANES_CALLBACK_SECRET: z.string().min(MIN_CALLBACK_SECRET_CHARS, `must be at least ${MIN_CALLBACK_SECRET_CHARS} characters`).optional(),
  /**
   * The secret being rotated out: while set, each callback carries a second `v1=` signed with it,
   * so a board still holding it verifies. Only with LANES_CALLBACK_SECRET.
   */
  LANES_CALLBACK_SECRET_PREVIOUS: z.string().min(MIN_CALLBACK_SECRET_CHARS, `must be at least ${MIN_CALLBACK_SECRET_CHARS} characters`).optional(),
  /** Hosts or CIDRs callbacks may reach although they are loopback, private or link-local (comma-separated). */
  LANES_CALLBACK_ALLOW: z
    .string()
    .transform((text, ctx): CallbackAllowRule[] => {
      const rules: CallbackAllowRule[] = [];
      for (const entry of text.split(',').filter((e) => e.trim() !== '')) {
        const rule = parseAllowRule(entry);
        if ('error' in rule) ctx.addIssue({ code: 'custom', message: rule.error });
        else rules.push(rule);
      }
      return rules;
    })
    .optional(),
  /** `1`: Bull Board shows the queues but refuses every change (retry, clean, pause, empty…). */
  LANES_BOARD_READONLY: z
    .enum(['0', '1', 'true', 'false'])
    .transform((v) => v === '1' || v === 'true')
    .default(false),
  /** SSE streams (`GET /v1/events`) one API process serves at once, over every token; beyond it 429 TOO_MANY_STREAMS. */
  LANES_SSE_MAX_STREAMS: Int(1).default(D.DEFAULT_SSE_MAX_STREAMS_TOTAL),
  /** SSE streams one token holds at once (all of open mode counts as one). */
  LANES_SSE_MAX_STREAMS_PER_TOKEN: Int(1).default(D.DEFAULT_SSE_MAX_STREAMS_PER_PRINCIPAL),
  MODAL_TOKEN_ID: z.string().optional(),
  MODAL_TOKEN_SECRET: z.string().optional(),
});
export type LanesEnv = z.infer<typeof LanesEnvSchema> & {
  /** The Redis that REDIS_URL or REDIS_SENTINELS names, parsed once; undefined when neither is set. */
  redis: RedisTarget | undefined;
};

/** Settings read only with REDIS_SENTINELS: REDIS_URL carries each of them itself. */
const SENTINEL_COMPANIONS = ['REDIS_USERNAME', 'REDIS_PASSWORD', 'REDIS_SENTINEL_USERNAME', 'REDIS_SENTINEL_PASSWORD', 'REDIS_TLS', 'REDIS_DB'] as const;

/** REDIS_URL or REDIS_SENTINELS (with REDIS_SENTINEL_NAME) as one target, or the issues naming the variable. */
function redisTargetOf(env: z.infer<typeof LanesEnvSchema>): { target: RedisTarget | undefined; issues: ValidationIssue[] } {
  const issues: ValidationIssue[] = [];
  if (env.REDIS_SENTINELS === undefined) {
    if (env.REDIS_SENTINEL_NAME !== undefined) issues.push({ path: 'REDIS_SENTINEL_NAME', message: 'is set without REDIS_SENTINELS, the sentinels to ask' });
    for (const key of SENTINEL_COMPANIONS) {
      if (env[key] !== undefined) issues.push({ path: key, message: 'is read only with REDIS_SENTINELS (REDIS_URL carries its own user:password@, rediss:// or ?db=)' });
    }
  }
  if (issues.length > 0) return { target: undefined, issues };
  if (env.REDIS_URL !== undefined) {
    if (env.REDIS_SENTINELS !== undefined) return { target: undefined, issues: [{ path: 'REDIS_SENTINELS', message: 'is set with REDIS_URL: set one of them' }] };
    const parsed = parseRedisUrl(env.REDIS_URL);
    if (parsed.ok) return { target: parsed.target, issues };
    return { target: undefined, issues: parsed.issues.map((i) => ({ path: i.path ? `REDIS_URL.${i.path}` : 'REDIS_URL', message: i.message })) };
  }
  if (env.REDIS_SENTINELS === undefined) return { target: undefined, issues };
  if (env.REDIS_SENTINEL_NAME === undefined) return { target: undefined, issues: [{ path: 'REDIS_SENTINEL_NAME', message: 'is required with REDIS_SENTINELS' }] };
  const parsed = sentinelTargetFromEnv({ ...env, REDIS_SENTINELS: env.REDIS_SENTINELS, REDIS_SENTINEL_NAME: env.REDIS_SENTINEL_NAME });
  return parsed.ok ? { target: parsed.target, issues } : { target: undefined, issues: parsed.issues };
}

export function parseEnv(env: Record<string, string | undefined>): LanesEnv {
  // Empty strings mean unset, as shells and compose files produce them.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = LanesEnvSchema.safeParse(present);
  if (!parsed.success) throw new ConfigError(toIssues(parsed.error), 'environment');
  if (parsed.data.LANES_CALLBACK_SECRET_PREVIOUS && !parsed.data.LANES_CALLBACK_SECRET) {
    throw new ConfigError([{ path: 'LANES_CALLBACK_SECRET_PREVIOUS', message: 'is set without LANES_CALLBACK_SECRET, the secret that replaces it' }], 'environment');
  }
  const redis = redisTargetOf(parsed.data);
  if (redis.issues.length > 0) throw new ConfigError(redis.issues, 'environment');
  return { ...parsed.data, redis: redis.target };
}
