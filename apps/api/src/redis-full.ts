import type { Redis } from 'ioredis';
import { defaults, type RedisFullError } from '@lanes/contracts';
import { asRedisFullError, evaluateRedisWritable, parseInfoMemory, type RedisWritable } from '@lanes/queue';

/**
 * What the API knows of Redis being full: the last OOM refusal one of its requests met, and a
 * verdict for `/readyz` that adds `INFO memory` (one round trip, no write) to it.
 */
export class RedisFullWatch {
  private lastOomAtMs: number | undefined;

  constructor(
    private readonly redis: Redis,
    private readonly now: () => number,
    private readonly fullWindowMs = defaults.DEFAULT_REDIS_FULL_READY_WINDOW_MS,
  ) {}

  /** The error read as Redis being full (and remembered as such), or undefined. */
  classify(err: unknown): RedisFullError | undefined {
    const full = asRedisFullError(err);
    if (full) this.lastOomAtMs = this.now();
    return full;
  }

  /** Whether Redis takes writes now (see evaluateRedisWritable); rejects when Redis does not answer. */
  async writable(): Promise<RedisWritable> {
    const info = parseInfoMemory(await this.redis.info('memory'));
    return evaluateRedisWritable({ ...info, ...(this.lastOomAtMs !== undefined ? { lastOomAtMs: this.lastOomAtMs } : {}) }, { fullWindowMs: this.fullWindowMs }, this.now());
  }
}
