/**
 * Whether Redis takes writes now: a pure reading of `INFO memory` and of the last OOM refusal this
 * process saw, for `/readyz`.
 *
 * | finding                                                                 | verdict                       |
 * |-------------------------------------------------------------------------|-------------------------------|
 * | an OOM refusal less than `fullWindowMs` ago                              | full: refused `n` ms ago      |
 * | `maxmemory` set, policy `noeviction`, used − not-counted > `maxmemory`  | full: used over maxmemory     |
 * | anything else                                                           | writable                      |
 *
 * The second row is Redis's own test before a write (`getMaxmemoryState`: `used_memory` less the
 * replication and AOF buffers, `mem_not_counted_for_evict`), so it clears the moment memory is
 * freed. Under an eviction policy Redis evicts instead of refusing, so only a refusal it still made
 * (nothing left to evict) counts, through the first row.
 */

/** What `INFO memory` says, in the fields the verdict needs. */
export interface RedisMemoryInfo {
  usedMemoryBytes: number;
  notCountedForEvictBytes: number;
  /** 0: no limit. */
  maxmemoryBytes: number;
  policy: string;
}

export interface RedisWritableSnapshot extends RedisMemoryInfo {
  /** When this process last saw Redis refuse a write for want of memory. */
  lastOomAtMs?: number;
}

export interface RedisWritableConfig {
  /** How long one OOM refusal keeps the verdict at full (DEFAULT_REDIS_FULL_READY_WINDOW_MS). */
  fullWindowMs: number;
}

export type RedisWritable = { writable: true } | { writable: false; reason: string };

export function evaluateRedisWritable(s: RedisWritableSnapshot, config: RedisWritableConfig, now: number): RedisWritable {
  if (s.lastOomAtMs !== undefined && now - s.lastOomAtMs < config.fullWindowMs) {
    return { writable: false, reason: `redis refused a write for want of memory (OOM) ${now - s.lastOomAtMs} ms ago` };
  }
  const counted = s.usedMemoryBytes - s.notCountedForEvictBytes;
  if (s.maxmemoryBytes > 0 && s.policy === 'noeviction' && counted > s.maxmemoryBytes) {
    return { writable: false, reason: `redis is full: used_memory ${counted} B is over maxmemory ${s.maxmemoryBytes} B (noeviction refuses writes)` };
  }
  return { writable: true };
}

/** The fields of an `INFO memory` reply; a field Redis did not send reads as 0 (or '' for the policy). */
export function parseInfoMemory(info: string): RedisMemoryInfo {
  const fields = new Map<string, string>();
  for (const line of info.split(/\r?\n/)) {
    const colon = line.indexOf(':');
    if (colon > 0) fields.set(line.slice(0, colon), line.slice(colon + 1).trim());
  }
  const bytes = (name: string) => {
    const n = Number(fields.get(name) ?? 0);
    return Number.isFinite(n) ? n : 0;
  };
  return {
    usedMemoryBytes: bytes('used_memory'),
    notCountedForEvictBytes: bytes('mem_not_counted_for_evict'),
    maxmemoryBytes: bytes('maxmemory'),
    policy: fields.get('maxmemory_policy') ?? '',
  };
}
