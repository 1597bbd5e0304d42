import { describe, expect, it } from 'vitest';
import { redisUnavailable, type ConnectionView } from '../src/redis-unavailable.js';

describe('redisUnavailable: when a failed request is a 503 REDIS_UNAVAILABLE', () => {
  it.each<[string, ConnectionView, string | undefined]>([
    ['ready, socket writable', { status: 'ready', stream: { writable: true } }, undefined],
    ['ready, but the socket already refuses writes (Redis just went away)', { status: 'ready', stream: { writable: false } }, 'redis connection is closing'],
    ['ready, no socket', { status: 'ready', stream: undefined }, 'redis connection is closing'],
    ['reconnecting', { status: 'reconnecting', stream: { writable: false } }, 'redis is reconnecting'],
    ['connecting (Sentinel still naming the primary)', { status: 'connecting', stream: { writable: true } }, 'redis is connecting'],
    ['end', { status: 'end', stream: { writable: false } }, 'redis is end'],
  ])('%s', (_case, conn, reason) => {
    expect(redisUnavailable(conn)).toBe(reason);
  });
});
