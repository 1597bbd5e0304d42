import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, writeFileSync } from 'node:fs';
import { createConnection } from 'node:net';
import { freePort } from './free-port.js';
import { join } from 'node:path';
import { LanesError, formatRedisTarget, type RedisTarget } from '@lanes/contracts';

/** A local Redis either answers PING this fast or is not there. */
export const REDIS_PROBE_TIMEOUT_MS = 500;
/** redis-server starts in milliseconds; this leaves room for a slow disk. */
export const REDIS_START_TIMEOUT_MS = 10_000;
export const DEFAULT_LOCAL_REDIS = { host: '127.0.0.1', port: 6379 };

export class RedisUnavailableError extends LanesError {
  readonly code = 'REDIS_UNAVAILABLE';
  readonly retry = 'permanent' as const;
  constructor(localPort = DEFAULT_LOCAL_REDIS.port) {
    super(
      [
        `no Redis: REDIS_URL and REDIS_SENTINELS are unset, nothing answers on ${DEFAULT_LOCAL_REDIS.host}:${localPort}, and there is no redis-server on PATH.`,
        'Get one with any of:',
        '  apt install redis-server        (Debian/Ubuntu)',
        '  brew install redis              (macOS)',
        '  docker compose up -d redis      (from this repository)',
        'or point REDIS_URL at an existing Redis (redis://host:6379), or REDIS_SENTINELS and REDIS_SENTINEL_NAME at its sentinels.',
      ].join('\n'),
    );
  }
}

export interface ResolvedRedis {
  /** A URL of any form createRedis reads (the Sentinel form for a Sentinel target). */
  url: string;
  source: 'REDIS_URL' | 'Sentinel' | 'local 6379' | 'embedded redis-server';
  /** Stops the redis-server we started; a no-op for one we only connected to. */
  stop(): Promise<void>;
}

/** Sends PING over a raw socket so that probing needs no client library and never retries. */
export function pingRedis(host: string, port: number, timeoutMs = REDIS_PROBE_TIMEOUT_MS, { authRequired = false } = {}): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('error', () => done(false));
    // A listener that hangs up without a word is not Redis; the idle timeout dies with the socket.
    socket.once('close', () => done(false));
    socket.once('connect', () => socket.write('PING\r\n'));
    // A server that asks for a password (our own) answers too: it is up.
    socket.once('data', (buf) => done(buf.toString().startsWith('+PONG') || (authRequired && buf.toString().startsWith('-NOAUTH'))));
  });
}

export interface ResolveRedisOptions {
  /** Port of the local Redis to try before starting one. Default 6379 (DEFAULT_LOCAL_REDIS). */
  localPort?: number;
  /** redis-server binary, a name looked up on PATH or a path. Default `redis-server`. */
  redisServer?: string;
}

/**
 * The configured Redis (`LanesEnv.redis`: REDIS_URL, or REDIS_SENTINELS) if there is one, probing
 * and starting nothing; else 127.0.0.1:6379 if it answers; else a redis-server from PATH on a free
 * port with AOF in `dataDir` and a password of its own; else RedisUnavailableError saying how to get one.
 */
export async function resolveRedis(configured: RedisTarget | undefined, dataDir: string, options: ResolveRedisOptions = {}): Promise<ResolvedRedis> {
  const localPort = options.localPort ?? DEFAULT_LOCAL_REDIS.port;
  const noop = async () => undefined;
  if (configured?.kind === 'url') return { url: configured.url, source: 'REDIS_URL', stop: noop };
  // Sentinel names the primary: a local Redis or an embedded one would be a second, split store.
  if (configured?.kind === 'sentinel') return { url: formatRedisTarget(configured), source: 'Sentinel', stop: noop };
  if (await pingRedis(DEFAULT_LOCAL_REDIS.host, localPort)) {
    return { url: `redis://${DEFAULT_LOCAL_REDIS.host}:${localPort}`, source: 'local 6379', stop: noop };
  }
  const port = await freePort();
  // Its data is every tenant's cards, and agents share this host's loopback: the directory is the
  // worker's alone, and the server asks for a password that only its config file (0600) holds.
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  chmodSync(dataDir, 0o700);
  const password = randomBytes(24).toString('hex');
  const conf = join(dataDir, 'lanes-redis.conf');
  writeFileSync(conf, `requirepass ${password}\n`, { mode: 0o600 });
  chmodSync(conf, 0o600);
  const args = [conf, '--port', String(port), '--bind', '127.0.0.1', '--dir', dataDir, '--appendonly', 'yes', '--maxmemory-policy', 'noeviction', '--save', ''];
  const child: ChildProcess = spawn(options.redisServer ?? 'redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
  const spawnFailed = await new Promise<boolean>((resolve) => {
    child.once('error', () => resolve(true));
    child.once('spawn', () => resolve(false));
  });
  if (spawnFailed) throw new RedisUnavailableError(localPort);
  // A process ended by a signal has exitCode null and signalCode set.
  const ended = () => child.exitCode !== null || child.signalCode !== null;
  const deadline = Date.now() + REDIS_START_TIMEOUT_MS;
  while (!(await pingRedis('127.0.0.1', port, REDIS_PROBE_TIMEOUT_MS, { authRequired: true }))) {
    if (ended() || Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new RedisUnavailableError(localPort);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  return {
    url: `redis://:${password}@127.0.0.1:${port}`,
    source: 'embedded redis-server',
    async stop() {
      if (ended()) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGTERM');
      await exited;
    },
  };
}

export const redisDataDir = (stateDir: string) => join(stateDir, 'redis');
