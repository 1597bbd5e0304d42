import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { EventLog } from '@lanes/queue';
import { notFound } from '../api-error.js';
import { inScope } from '../edge/principal.js';

/** Each blocking read waits at most this long, so a closed client is noticed promptly. */
export const SSE_BLOCK_MS = 5_000;
/** A comment line keeps proxies from closing an idle stream. */
export const SSE_KEEPALIVE_MS = 15_000;

/**
 * Server-sent card and sandbox events from the Redis stream. `Last-Event-ID` (or `?since=`) resumes;
 * otherwise the stream starts with new events. Each client gets its own connection for blocking reads.
 */
export function eventRoutes(app: FastifyInstance, deps: { redis: Redis }): void {
  const streams = new Set<() => void>();
  app.get<{ Querystring: { since?: string; lane?: string } }>('/v1/events', async (request, reply) => {
    const since = (request.headers['last-event-id'] as string | undefined) ?? request.query.since ?? '$';
    const lane = request.query.lane;
    // A lane outside the token's scope answers as an unknown one; unfiltered, the stream holds only in-scope lanes.
    if (lane !== undefined && !inScope(request.principal, lane)) throw notFound(`lane ${lane}`);
    // Pin "new events only" to the current tail before answering, so nothing after the answer is missed.
    // On the API's own connection: a fresh duplicate is not ready yet and, with no offline queue, would
    // fail, and falling back to 0-0 replayed the whole stream. A Redis that is down answers 503 instead.
    let cursor = since === '$' ? ((await new EventLog(deps.redis).recent(1))[0]?.id ?? '0-0') : since;
    const conn = deps.redis.duplicate();
    conn.on('error', () => undefined); // the read loop sees failures and retries
    const log = new EventLog(conn);
    let open = true;
    const stop = () => {
      open = false;
      conn.disconnect();
    };
    request.raw.on('close', stop);
    streams.add(stop);
    reply.hijack();
    reply.raw.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // An id-only frame hands the client the pinned resume point before any event arrives: a client that
    // drops before the first event resumes from here, not from "now" again, and misses nothing in between.
    reply.raw.write(`: lanes events\nid: ${cursor}\n\n`);
    let lastWrite = Date.now();
    while (open) {
      try {
        const events = await log.read(cursor, SSE_BLOCK_MS);
        for (const e of events) {
          cursor = e.id;
          if ((lane && e.lane !== lane) || !inScope(request.principal, e.lane)) continue;
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
    streams.delete(stop);
    reply.raw.end();
  });
  // Streams never end by themselves; closing the server must end them.
  app.addHook('onClose', async () => {
    for (const stop of streams) stop();
  });
}
