import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';

/** Redis must answer within this for /readyz to say ready. */
export const READY_PING_TIMEOUT_MS = 1_000;

export function healthRoutes(app: FastifyInstance, deps: { redis: Redis }): void {
  // Liveness: the event loop answers. Never touches Redis, so a Redis outage does not restart us.
  app.get('/healthz', async () => ({ ok: true }));

  app.get('/readyz', async (_request, reply) => {
    try {
      const pong = await Promise.race([
        deps.redis.ping(),
        new Promise<never>((_, reject) => setTimeout(() => reject(new Error('redis ping timed out')), READY_PING_TIMEOUT_MS).unref()),
      ]);
      return { ok: pong === 'PONG', redis: 'up' };
    } catch (err) {
      return reply.code(503).send({ error: { code: 'NOT_READY', message: `redis: ${err instanceof Error ? err.message : String(err)}` } });
    }
  });
}
