import { createRequire } from 'node:module';
import { Redis, type RedisOptions } from 'ioredis';
import { ConfigError, parseRedisUrl, redactRedisUrl as redact, type RedisTarget, type SentinelTarget } from '@lanes/contracts';

/**
 * ioredis 5 leaves a connection disconnected between two reconnect attempts in `reconnecting`
 * for good: it never emits `end` and its queued commands never settle. BullMQ's `Worker.close()`
 * waits for the blocking connection's `end`, so a worker stopped while Redis was unreachable hung
 * there. Such a connection has no socket left, so it is closed as ioredis closes one in `wait`.
 */
class ClosableRedis extends Redis {
  override disconnect(reconnect = false): void {
    if (!reconnect && this.status === 'reconnecting') this.status = 'wait';
    super.disconnect(reconnect);
  }

  // BullMQ duplicates the connection it is given for its blocking reads: the copy closes alike
  // (and, on Sentinel, finds the primary alike: `options` holds the sentinels and the group).
  override duplicate(override?: Partial<RedisOptions>): Redis {
    return closable(new ClosableRedis({ ...this.options, ...override }));
  }
}

/** Every connection lanes makes, and every copy BullMQ makes of one, with the holes below closed. */
function closable(conn: ClosableRedis): Redis {
  return endsWhole(settlesStashOnEnd(conn));
}

/** The message ioredis rejects a closed connection's commands with, which BullMQ reads as a connection error. */
const CONNECTION_CLOSED = 'Connection is closed.';

interface ReconnectStash {
  prevCommandQueue?: { shift(): { command: { reject(err: Error): void } } | undefined } | null;
}

/**
 * ioredis 5 keeps the commands in flight when a ready socket drops (`prevCommandQueue`) to send
 * them again once a new socket is ready. A reconnect that connects but never becomes ready (Redis
 * back, the ready check unanswered) starts a new command queue, and a connection ended from there
 * ends without them: they never settle, and whatever awaits them (a stop awaiting the callback
 * dispatcher's read) waits for good, Redis back or not. They fail as the rest of the connection's
 * commands do when it ends (redis/ioredis#2197 describes the same hole).
 */
function settlesStashOnEnd<T extends Redis>(conn: T): T {
  if (!settlesReconnectStash()) return conn;
  conn.on('end', () => {
    const internals = conn as unknown as ReconnectStash;
    const stash = internals.prevCommandQueue;
    if (!stash) return;
    internals.prevCommandQueue = null;
    for (let item = stash.shift(); item; item = stash.shift()) item.command.reject(new Error(CONNECTION_CLOSED));
  });
  return conn;
}

/** The ioredis whose SentinelConnector (its private `failoverDetector`) `endsWhole` was read against. */
export const SENTINEL_DETECTOR_IOREDIS_VERSION = '5.11.1';

/** The ioredis this process runs (its package.json; ioredis declares no exports map). */
export const installedIoredisVersion: string = (createRequire(import.meta.url)('ioredis/package.json') as { version: string }).version;

/**
 * The ioredis whose reconnect stash `settlesStashOnEnd` was read against: the same version as the
 * Sentinel connector's, one ioredis to check on a bump.
 */
export const RECONNECT_STASH_IOREDIS_VERSION = SENTINEL_DETECTOR_IOREDIS_VERSION;

/** Whether an ended connection fails the commands ioredis stashed for a reconnect: only under the ioredis it was read against. */
export function settlesReconnectStash(ioredisVersion: string = installedIoredisVersion): boolean {
  return ioredisVersion === RECONNECT_STASH_IOREDIS_VERSION;
}

/** Whether a closed socket's failover detector is dropped: only under the ioredis it was read against. */
export function dropsStaleFailoverDetector(ioredisVersion: string = installedIoredisVersion): boolean {
  return ioredisVersion === SENTINEL_DETECTOR_IOREDIS_VERSION;
}

interface SentinelConnectorInternals {
  disconnect(): void;
  failoverDetector: { cleanup(): void } | null;
}

/**
 * Two holes in ioredis 5's Sentinel connector, closed from outside it:
 *
 * - It ends a connection's failover detector (its subscriptions to every sentinel) only on
 *   `disconnect()`: after `quit()`, or a retry strategy that gave up, those sockets stayed open, so
 *   a stopped `lanes up` never exited. Once the connection has ended for good, its connector is
 *   told to disconnect too, which closes them.
 * - A socket that closed by itself (the primary killed) keeps its detector subscribed while the
 *   connection reconnects. A `+switch-master` heard while the reconnect still asks a sentinel for
 *   the primary then disconnects the connector under that lookup, and ioredis ends the connection
 *   for good ("Connection is closed"). The detector only exists to leave a socket that stays open
 *   on a primary that froze, so it is dropped with its socket; the next socket subscribes anew.
 */
function endsWhole(conn: Redis, dropStaleDetector = dropsStaleFailoverDetector()): Redis {
  if (!conn.options.sentinels) return conn;
  const connector = () => (conn as unknown as { connector: SentinelConnectorInternals }).connector;
  conn.on('end', () => connector().disconnect());
  if (dropStaleDetector)
    conn.on('close', () => {
      const c = connector();
      c.failoverDetector?.cleanup();
      c.failoverDetector = null;
    });
  return conn;
}

/** ioredis options for a Sentinel target: the primary of `name`, and a move to a new one as soon as the sentinels announce it. */
export function sentinelOptions(t: SentinelTarget): RedisOptions {
  return {
    sentinels: t.sentinels,
    name: t.name,
    db: t.db,
    ...(t.username !== undefined ? { username: t.username } : {}),
    ...(t.password !== undefined ? { password: t.password } : {}),
    ...(t.sentinelUsername !== undefined ? { sentinelUsername: t.sentinelUsername } : {}),
    ...(t.sentinelPassword !== undefined ? { sentinelPassword: t.sentinelPassword } : {}),
    // One switch: TLS to the sentinels and to the primary they name, as `rediss://` is to one Redis.
    ...(t.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
    // Subscribes to the sentinels' +switch-master: a connection to a primary that froze or was cut
    // off moves to the promoted one instead of waiting on a socket that never answers.
    failoverDetector: true,
  };
}

/** The one parse every connection goes through: a URL of any form (see parseRedisUrl) or a parsed target. */
export function redisTarget(url: string | RedisTarget): RedisTarget {
  if (typeof url !== 'string') return url;
  const parsed = parseRedisUrl(url);
  if (!parsed.ok)
    throw new ConfigError(
      parsed.issues.map((i) => ({ path: i.path ? `redis.${i.path}` : 'redis', message: i.message })),
      'Redis URL',
    );
  return parsed.target;
}

/**
 * One factory for every Redis connection, of every part, on one Redis or on Sentinel alike.
 * Workers and blocking readers need `maxRetriesPerRequest: null` so a Redis restart or a failover
 * pauses them instead of failing their commands.
 */
export function createRedis(url: string | RedisTarget, options: RedisOptions = {}): Redis {
  const target = redisTarget(url);
  const defaults: RedisOptions = { maxRetriesPerRequest: null, enableReadyCheck: true };
  if (target.kind === 'url') return closable(new ClosableRedis(target.url, { ...defaults, ...options }));
  return closable(new ClosableRedis({ ...sentinelOptions(target), ...defaults, ...options }));
}

/** A Redis URL of any form with every password replaced, for logs. */
export function redactRedisUrl(url: string): string {
  return redact(url);
}
