import { z } from 'zod';
import type { ValidationIssue } from './errors/validation-issue.js';
import { toIssues } from './validation.js';

/** Sentinel's well-known port: a sentinel address written without a port means this one. */
export const DEFAULT_SENTINEL_PORT = 26379;

export interface RedisHostPort {
  host: string;
  port: number;
}

/**
 * The primary of Sentinel group `name`, found by asking `sentinels`. The ACL user and password are
 * the data nodes' (as in `redis://user:pass@…`); the sentinels may have their own.
 */
export interface SentinelTarget {
  kind: 'sentinel';
  sentinels: RedisHostPort[];
  name: string;
  /** TLS to the data nodes and to the sentinels alike (`rediss+sentinel://`, `REDIS_TLS=1`). */
  tls: boolean;
  db: number;
  username?: string;
  password?: string;
  sentinelUsername?: string;
  sentinelPassword?: string;
}

/**
 * Where lanes' Redis is. Every connection of every part is built from this one parsed form
 * (`createRedis` in libs/queue), so a part never knows whether it talks to Sentinel.
 * - `url`: one Redis at a `redis://` or `rediss://` URL, handed to ioredis as written.
 * - `sentinel`: a Sentinel-managed primary.
 */
export type RedisTarget = { kind: 'url'; url: string } | SentinelTarget;

export type RedisTargetResult = { ok: true; target: RedisTarget } | { ok: false; issues: ValidationIssue[] };

/**
 * `redis+sentinel://[user:pass@]host[:port][,host[:port]…]/<name>[?db=N&sentinelUsername=…&sentinelPassword=…]`;
 * `rediss+sentinel://` is the same over TLS. Reserved characters in a user, password or name are
 * percent-encoded (`@` is `%40`); a `+` stays a `+`.
 */
const SENTINEL_URL = /^(rediss?)\+sentinel:\/\/(?:([^@/?#]*)@)?([^/?#]*)(?:\/([^?#]*))?(?:\?([^#]*))?$/;
const PLAIN_URL = /^rediss?:\/\//;

const HOST = /^[A-Za-z0-9._-]+$/;

/** `host`, `host:port` or `[v6]:port`; the port defaults to Sentinel's. */
const SentinelAddressSchema = z.string().transform((entry, ctx): RedisHostPort => {
  const text = entry.trim();
  const m = /^\[([0-9A-Fa-f:.]+)\](?::(\d+))?$/.exec(text) ?? /^([^:[\]]+)(?::(\d+))?$/.exec(text);
  const host = m?.[1];
  const port = m?.[2] === undefined ? DEFAULT_SENTINEL_PORT : Number(m[2]);
  if (!host || (!text.startsWith('[') && !HOST.test(host)) || !Number.isInteger(port) || port < 1 || port > 65_535) {
    ctx.addIssue({ code: 'custom', message: `"${text}" is not host[:port] with a port of 1-65535` });
    return z.NEVER;
  }
  return { host, port };
});

const Secret = z.string().min(1, 'is empty');
const Db = z.string().regex(/^\d+$/, 'must be a database number (0, 1, …)').transform(Number).pipe(z.number().int().min(0).max(1_000_000, 'must be a database number (0, 1, …)'));

/** The pieces of a Sentinel target, from a URL or from the environment, validated alike. */
const SentinelPartsSchema = z.object({
  sentinels: z.array(SentinelAddressSchema).min(1, 'names no sentinel: give host:port[,host:port…]'),
  name: z
    .string()
    .min(1, 'names no Sentinel group: end the URL with /<name>')
    .regex(/^[^\s/]+$/, 'must be one word without spaces or /'),
  tls: z.boolean(),
  username: Secret.optional(),
  password: Secret.optional(),
  query: z.strictObject({
    db: Db.optional(),
    sentinelUsername: Secret.optional(),
    sentinelPassword: Secret.optional(),
  }),
});
type SentinelParts = z.input<typeof SentinelPartsSchema>;

function compile(parts: SentinelParts): RedisTargetResult {
  const parsed = SentinelPartsSchema.safeParse(parts);
  if (!parsed.success) return { ok: false, issues: toIssues(parsed.error) };
  const { query, ...p } = parsed.data;
  const target: SentinelTarget = { kind: 'sentinel', sentinels: p.sentinels, name: p.name, tls: p.tls, db: query.db ?? 0 };
  if (p.username !== undefined) target.username = p.username;
  if (p.password !== undefined) target.password = p.password;
  if (query.sentinelUsername !== undefined) target.sentinelUsername = query.sentinelUsername;
  if (query.sentinelPassword !== undefined) target.sentinelPassword = query.sentinelPassword;
  return { ok: true, target };
}

/** decodeURIComponent that names the part instead of echoing it (it may be a password). */
function decode(text: string, what: string, issues: ValidationIssue[]): string {
  try {
    return decodeURIComponent(text);
  } catch {
    issues.push({ path: what, message: 'is not valid percent-encoding' });
    return '';
  }
}

/**
 * Parses a Redis URL: `redis://` / `rediss://` (one Redis, read by ioredis as written) or the
 * Sentinel form above. Issues name the part that is wrong (`sentinels.1`, `query.db`, `query`
 * for an unknown parameter) and never echo a password.
 */
export function parseRedisUrl(url: string): RedisTargetResult {
  if (PLAIN_URL.test(url)) return { ok: true, target: { kind: 'url', url } };
  const m = SENTINEL_URL.exec(url);
  if (!m) {
    const message = /^rediss?\+sentinel:/.test(url)
      ? 'is not redis+sentinel://[user:pass@]host:port[,host:port…]/<name>[?db=N&sentinelUsername=…&sentinelPassword=…]'
      : 'must be a redis://, rediss://, redis+sentinel:// or rediss+sentinel:// URL';
    return { ok: false, issues: [{ path: '', message }] };
  }
  const [, scheme, userinfo, hosts = '', path = '', search] = m;
  const issues: ValidationIssue[] = [];
  const parts: SentinelParts = {
    tls: scheme === 'rediss',
    sentinels: hosts === '' ? [] : hosts.split(','),
    name: decode(path, 'name', issues),
    query: {},
  };
  if (userinfo !== undefined) {
    const colon = userinfo.indexOf(':');
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    if (user !== '') parts.username = decode(user, 'username', issues);
    if (colon >= 0) parts.password = decode(userinfo.slice(colon + 1), 'password', issues);
  }
  const query: Record<string, string> = {};
  for (const pair of (search ?? '').split('&').filter((p) => p !== '')) {
    const eq = pair.indexOf('=');
    const key = decode(eq < 0 ? pair : pair.slice(0, eq), 'query', issues);
    if (key in query) issues.push({ path: `query.${key}`, message: 'is given twice' });
    query[key] = decode(eq < 0 ? '' : pair.slice(eq + 1), `query.${key}`, issues);
  }
  parts.query = query;
  if (issues.length > 0) return { ok: false, issues };
  return compile(parts);
}

/** The environment's Sentinel settings (REDIS_SENTINELS and its companions), as parsed strings. */
export interface SentinelEnv {
  REDIS_SENTINELS: string;
  REDIS_SENTINEL_NAME: string;
  REDIS_USERNAME?: string | undefined;
  REDIS_PASSWORD?: string | undefined;
  REDIS_SENTINEL_USERNAME?: string | undefined;
  REDIS_SENTINEL_PASSWORD?: string | undefined;
  REDIS_TLS?: boolean | undefined;
  REDIS_DB?: string | undefined;
}

/** Which environment variable each piece of a Sentinel target comes from, for issues that name it. */
const ENV_KEY_OF: Record<string, keyof SentinelEnv> = {
  sentinels: 'REDIS_SENTINELS',
  name: 'REDIS_SENTINEL_NAME',
  username: 'REDIS_USERNAME',
  password: 'REDIS_PASSWORD',
  'query.db': 'REDIS_DB',
  'query.sentinelUsername': 'REDIS_SENTINEL_USERNAME',
  'query.sentinelPassword': 'REDIS_SENTINEL_PASSWORD',
};

/** The same target as the URL form, from REDIS_SENTINELS and its companions; issues name the variable. */
export function sentinelTargetFromEnv(env: SentinelEnv): RedisTargetResult {
  const query: Record<string, string> = {};
  if (env.REDIS_DB !== undefined) query.db = env.REDIS_DB;
  if (env.REDIS_SENTINEL_USERNAME !== undefined) query.sentinelUsername = env.REDIS_SENTINEL_USERNAME;
  if (env.REDIS_SENTINEL_PASSWORD !== undefined) query.sentinelPassword = env.REDIS_SENTINEL_PASSWORD;
  const parts: SentinelParts = {
    sentinels: env.REDIS_SENTINELS.split(',').filter((s) => s.trim() !== ''),
    name: env.REDIS_SENTINEL_NAME,
    tls: env.REDIS_TLS ?? false,
    query,
  };
  if (env.REDIS_USERNAME !== undefined) parts.username = env.REDIS_USERNAME;
  if (env.REDIS_PASSWORD !== undefined) parts.password = env.REDIS_PASSWORD;
  const result = compile(parts);
  if (result.ok) return result;
  return {
    ok: false,
    issues: result.issues.map((i) => {
      const key = Object.keys(ENV_KEY_OF).find((k) => i.path === k || i.path.startsWith(`${k}.`));
      return { path: key ? ENV_KEY_OF[key]! : 'REDIS_SENTINELS', message: i.message };
    }),
  };
}

const REDACTED = '***';

function hostPort({ host, port }: RedisHostPort): string {
  return `${host.includes(':') ? `[${host}]` : host}:${port}`;
}

/**
 * The target as one URL (the Sentinel form for a Sentinel target), which `parseRedisUrl` reads back
 * as the same target. `redact` replaces every password with `***`, for logs.
 */
export function formatRedisTarget(target: RedisTarget, { redact = false }: { redact?: boolean } = {}): string {
  if (target.kind === 'url') {
    if (!redact) return target.url;
    try {
      const u = new URL(target.url);
      if (u.password) u.password = REDACTED;
      return u.toString();
    } catch {
      return 'redis://(unparseable)';
    }
  }
  const secret = (s: string) => (redact ? REDACTED : encodeURIComponent(s));
  const user = target.username === undefined ? '' : encodeURIComponent(target.username);
  const userinfo = target.password === undefined ? (user ? `${user}@` : '') : `${user}:${secret(target.password)}@`;
  const query = [
    target.db !== 0 ? `db=${target.db}` : '',
    target.sentinelUsername !== undefined ? `sentinelUsername=${encodeURIComponent(target.sentinelUsername)}` : '',
    target.sentinelPassword !== undefined ? `sentinelPassword=${secret(target.sentinelPassword)}` : '',
  ].filter((q) => q !== '');
  const scheme = target.tls ? 'rediss+sentinel' : 'redis+sentinel';
  return `${scheme}://${userinfo}${target.sentinels.map(hostPort).join(',')}/${encodeURIComponent(target.name)}${query.length ? `?${query.join('&')}` : ''}`;
}

/** A Redis URL of any form with its passwords replaced by `***`, for logs; never echoes one it cannot parse. */
export function redactRedisUrl(url: string): string {
  const parsed = parseRedisUrl(url);
  if (parsed.ok) return formatRedisTarget(parsed.target, { redact: true });
  return /^rediss?\+sentinel:/.test(url) ? 'redis+sentinel://(unparseable)' : 'redis://(unparseable)';
}
