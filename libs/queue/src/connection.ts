import { Redis, type RedisOptions } from 'ioredis';

/**
 * One factory for every Redis connection. Workers and blocking readers need
 * `maxRetriesPerRequest: null` so a Redis restart pauses them instead of failing their commands.
 */
export function createRedis(url: string, options: RedisOptions = {}): Redis {
  return new Redis(url, { maxRetriesPerRequest: null, enableReadyCheck: true, ...options });
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
