import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { EventLog } from '@lanes/queue';

/** Each blocking read waits at most this long, so a closed client is noticed promptly. */
export const SSE_BLOCK_MS = 5_000;
/** A comment line keeps proxies from closing an idle stream. */
export const SSE_KEEPALIVE_MS = 15_000;

/**
 * Server-sent card and sandbox events from the Redis stream. `Last-Event-ID` (or `?since=`) resumes;
 * otherwise the stream starts with new events. Each client gets its own connection for blocking reads.
 */
export function eventRoutes(app: FastifyInstance, deps: { redis: Redis }): void {
  app.get<{ Querystring: { since?: string; lane?: string } }>('/v1/events', async (request, reply) => {
    const since = (request.headers['last-event-id'] as string | undefined) ?? request.query.since ?? '$';
    const lane = request.query.lane;
    const conn = deps.redis.duplicate();
    const log = new EventLog(conn);
    let open = true;
    request.raw.on('close', () => {
      open = false;
      conn.disconnect();
    });
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    reply.raw.write(': lanes events\n\n');
    // Pin "new events only" to the current tail, so nothing between two reads is skipped.
    let cursor = since === '$' ? ((await log.recent(1).catch(() => []))[0]?.id ?? '0-0') : since;
    let lastWrite = Date.now();
    while (open) {
      try {
        const events = await log.read(cursor, SSE_BLOCK_MS);
        for (const e of events) {
          cursor = e.id;
          if (lane && e.lane !== lane) continue;
          reply.raw.write(`id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`);
          lastWrite = Date.now();
        }
        if (Date.now() - lastWrite > SSE_KEEPALIVE_MS) {
          reply.raw.write(': keepalive\n\n');
          lastWrite = Date.now();
        }
      } catch {
        if (!open) break;
        await new Promise((r) => setTimeout(r, 500));
      }
    }
    reply.raw.end();
  });
}
