import { z } from 'zod';
import * as D from './defaults.js';
import { parseAllowRule, type CallbackAllowRule } from './callback-target.js';
import { ConfigError } from './errors/config-error.js';
import { toIssues } from './validation.js';

const Int = (min: number) => z.coerce.number().int().min(min);

/** Settings that come from the environment; validated once at boot, errors name the variable. */
export const LanesEnvSchema = z.object({
  REDIS_URL: z
    .string()
    .regex(/^rediss?:\/\//, 'must be a redis:// or rediss:// URL')
    .optional(),
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
  LANES_CALLBACK_SECRET: z.string().min(16, 'must be at least 16 characters').optional(),
  /**
   * The secret being rotated out: while set, each callback carries a second `v1=` signed with it,
   * so a board still holding it verifies. Only with LANES_CALLBACK_SECRET.
   */
  LANES_CALLBACK_SECRET_PREVIOUS: z.string().min(16, 'must be at least 16 characters').optional(),
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
export type LanesEnv = z.infer<typeof LanesEnvSchema>;

export function parseEnv(env: Record<string, string | undefined>): LanesEnv {
  // Empty strings mean unset, as shells and compose files produce them.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = LanesEnvSchema.safeParse(present);
  if (!parsed.success) throw new ConfigError(toIssues(parsed.error), 'environment');
  if (parsed.data.LANES_CALLBACK_SECRET_PREVIOUS && !parsed.data.LANES_CALLBACK_SECRET) {
    throw new ConfigError([{ path: 'LANES_CALLBACK_SECRET_PREVIOUS', message: 'is set without LANES_CALLBACK_SECRET, the secret that replaces it' }], 'environment');
  }
  return parsed.data;
}
