import type { FastifyInstance } from 'fastify';
import type { RedisFullWatch } from '../redis-full.js';

/** Redis must answer within this for /readyz to say ready. */
export const READY_PING_TIMEOUT_MS = 1_000;

export function healthRoutes(app: FastifyInstance, deps: { full: RedisFullWatch }): void {
  // Liveness: the event loop answers. Never touches Redis, so a Redis outage does not restart us.
  app.get('/healthz', async () => ({ ok: true }));

  // Ready: Redis answers (INFO memory, within the timeout) and takes writes (not at its maxmemory).
  app.get('/readyz', async (_request, reply) => {
    try {
      const verdict = await Promise.race([
        deps.full.writable(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('redis ping timed out')), READY_PING_TIMEOUT_MS).unref()),
      ]);
      if (!verdict.writable) return reply.code(503).send({ error: { code: 'REDIS_FULL', message: verdict.reason } });
      return { ok: true, redis: 'up' };
    } catch (err) {
      return reply.code(503).send({ error: { code: 'NOT_READY', message: `redis: ${err instanceof Error ? err.message : String(err)}` } });
    }
  });
}
