import { describe, expect, it } from 'vitest';
import { evaluateRedisWritable, parseInfoMemory, type RedisWritableSnapshot } from '@lanes/queue';

const NOW = 1_700_000_000_000;
const WINDOW_MS = 10_000;
const MAX = 1_000_000;
const base: RedisWritableSnapshot = { usedMemoryBytes: 500_000, notCountedForEvictBytes: 0, maxmemoryBytes: MAX, policy: 'noeviction' };

describe('evaluateRedisWritable', () => {
  it.each<[string, Partial<RedisWritableSnapshot>, boolean]>([
    ['well under maxmemory', {}, true],
    ['exactly at maxmemory (Redis refuses only above it)', { usedMemoryBytes: MAX }, true],
    ['1 byte over maxmemory under noeviction', { usedMemoryBytes: MAX + 1 }, false],
    ['over, but the replication/AOF buffers bring it under', { usedMemoryBytes: MAX + 100, notCountedForEvictBytes: 100 }, true],
    ['over, buffers not enough', { usedMemoryBytes: MAX + 101, notCountedForEvictBytes: 100 }, false],
    ['over, but no maxmemory set', { usedMemoryBytes: 10 * MAX, maxmemoryBytes: 0 }, true],
    ['over under an eviction policy (Redis evicts instead)', { usedMemoryBytes: MAX + 1, policy: 'allkeys-lru' }, true],
    ['an OOM seen 1 ms inside the window', { lastOomAtMs: NOW - WINDOW_MS + 1 }, false],
    ['an OOM seen exactly a window ago', { lastOomAtMs: NOW - WINDOW_MS }, true],
    ['an OOM seen 1 ms past the window', { lastOomAtMs: NOW - WINDOW_MS - 1 }, true],
    ['an OOM seen just now under an eviction policy', { lastOomAtMs: NOW, policy: 'volatile-lru' }, false],
  ])('%s → writable: %s', (_name, over, writable) => {
    const verdict = evaluateRedisWritable({ ...base, ...over }, { fullWindowMs: WINDOW_MS }, NOW);
    expect(verdict.writable).toBe(writable);
    if (!verdict.writable) expect(verdict.reason).toMatch(/OOM|maxmemory/);
  });
});

describe('parseInfoMemory', () => {
  it('reads the fields of a real INFO memory reply, and absent ones as 0', () => {
    const info =
      '# Memory\r\nused_memory:1088440\r\nused_memory_human:1.04M\r\nmaxmemory:1\r\nmaxmemory_human:1B\r\nmaxmemory_policy:noeviction\r\nmem_not_counted_for_evict:12\r\n';
    expect(parseInfoMemory(info)).toEqual({ usedMemoryBytes: 1_088_440, notCountedForEvictBytes: 12, maxmemoryBytes: 1, policy: 'noeviction' });
    expect(parseInfoMemory('# Memory\r\n')).toEqual({ usedMemoryBytes: 0, notCountedForEvictBytes: 0, maxmemoryBytes: 0, policy: '' });
  });
});
