import { Redis, type RedisOptions } from 'ioredis';

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

  // BullMQ duplicates the connection it is given for its blocking reads: the copy closes alike.
  override duplicate(override?: Partial<RedisOptions>): Redis {
    return new ClosableRedis({ ...this.options, ...override });
  }
}

/**
 * One factory for every Redis connection. Workers and blocking readers need
 * `maxRetriesPerRequest: null` so a Redis restart pauses them instead of failing their commands.
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new ClosableRedis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, ...options });
}

/** Redis URL with any password replaced, for logs. */
export function redactRedisUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return 'redis://(unparseable)';
  }
}
