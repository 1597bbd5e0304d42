import type { Redis } from 'ioredis';

/** What of a connection tells whether it can carry a command now. */
export type ConnectionView = Pick<Redis, 'status'> & { stream?: { writable: boolean } | null | undefined };

/**
 * Why the API's connection cannot carry a command now, or undefined when it can: ioredis's own
 * test before it sends (`ready`, and a socket that takes writes). A socket whose Redis went away
 * (a primary killed, a failover) refuses writes a moment before ioredis sees the close and leaves
 * `ready`; a request failing in that moment is Redis being unavailable too, a 503, not a 500.
 */
export function redisUnavailable(conn: ConnectionView): string | undefined {
  if (conn.status !== 'ready') return `redis is ${conn.status}`;
  if (!conn.stream?.writable) return 'redis connection is closing';
  return undefined;
}
