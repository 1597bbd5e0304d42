import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { StreamIdSchema, compareStreamIds, isTerminalCardState } from '@lanes/contracts';
import type { CardOutput, CardStore } from '@lanes/queue';
import { notFound } from '../api-error.js';
import { inScope } from '../edge/principal.js';
import type { FanoutSink } from '../sse/event-fanout.js';
import type { OutputFanout } from '../sse/output-fanout.js';
import { parseResumeRequest } from '../sse/resume-request.js';
import { SseStream, type SseStreamConfig } from '../sse/sse-stream.js';

/** What the output route shares with `/v1/events` (events.ts): the stream caps, the open streams, the count of drops. */
export interface CardOutputRouteDeps {
  store: CardStore;
  output: CardOutput;
  fanout: OutputFanout;
  /** Counts the stream against its principal's and the process's caps, or throws 429; answers the principal. */
  admit(request: FastifyRequest): string;
  streamConfig: SseStreamConfig;
  track(stream: SseStream): void;
  closed(stream: SseStream, principal: string): void;
  dropped(): void;
}

const OutputQuerySchema = z.object({ after: StreamIdSchema.optional() });

/** `?after=` and `Last-Event-ID` (which wins, as browsers send it on reconnect), validated. */
function resumeIdOf(request: FastifyRequest): string | undefined {
  const { query, lastEventId } = parseResumeRequest(request, OutputQuerySchema);
  return lastEventId ?? query.after;
}

/**
 * `GET /v1/cards/:id/output`: the card's output lines as SSE, `event: output` with `{lines}` per
 * batch, each with its stream id. Without a resume id it starts at the oldest line still held
 * (CARD_OUTPUT_MAX_BYTES); with one, after it, so a client that reconnects misses none and repeats
 * none. After the card's end (`event: end` with `{state}`) the stream ends. Visible as
 * `GET /v1/cards/:id` is: a card outside the token's lanes is 404, as an unknown one.
 */
export function cardOutputRoute(app: FastifyInstance, deps: CardOutputRouteDeps): void {
  app.get<{ Params: { id: string } }>('/v1/cards/:id/output', async (request, reply) => {
    const { id } = request.params;
    const after = resumeIdOf(request);
    const card = await deps.store.get(id);
    if (!card || !inScope(request.principal, card.lane)) throw notFound(`card ${id}`);
    const principal = deps.admit(request);
    const stream: SseStream = new SseStream(reply.raw, () => true, deps.streamConfig, {
      onEnd: (reason, resumeId) => {
        deps.fanout.detach(id, sink);
        if (reason === 'slow-consumer') {
          deps.dropped();
          request.log.warn({ principal, cardId: id, resumeId }, 'sse.dropped');
        }
      },
      onClose: () => deps.closed(stream, principal),
    });
    // An end entry ends the stream unless the card has been retried since (its next run's lines follow).
    const endIfEnded = async () => {
      const now = await deps.store.get(id).catch(() => card);
      if (!now || isTerminalCardState(now.state)) stream.end('card-ended');
    };
    const sink: FanoutSink = {
      get isOpen() {
        return stream.isOpen;
      },
      begin: (afterId) => stream.begin(afterId),
      push: (events) => {
        stream.push(events);
        if (events.some((e) => e.end !== undefined)) void endIfEnded();
      },
      get needsDrain() {
        return stream.needsDrain;
      },
      drained: () => stream.drained(),
    };
    deps.track(stream);
    reply.hijack();
    try {
      const seen = await deps.fanout.attach(id, card.lane, sink, after);
      // A card that had ended, resumed after its last entry (or ended before it kept output): nothing more comes.
      if (stream.isOpen && isTerminalCardState(card.state) && compareStreamIds(seen, await deps.output.tailId(id)) >= 0) stream.end('card-ended');
    } catch (err) {
      request.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sse.catch_up_failed');
      stream.end('redis-unavailable');
    }
  });
}
