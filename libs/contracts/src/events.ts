import { z } from 'zod';
import { StreamIdSchema } from './stream-id.js';

/** Stable, dotted event names: logged with pino and appended to the Redis event stream. */
export const EventTypeSchema = z.enum([
  'card.queued',
  'card.running',
  'card.done',
  'card.failed',
  'card.cancelled',
  'card.blocked',
  'card.redriven',
  'card.unblocked',
  /** A failed or cancelled card queued again (POST /v1/cards/:id/retry), its attempts reset. */
  'card.retried',
  /**
   * Over its key's limit (a concurrency key's maxRunningPerKey, a supersede key's one at a time):
   * put back until a card of the key ends, or until `data.retryAt`, the backstop; it may wait again then.
   */
  'card.key-waiting',
  'sandbox.created',
  'sandbox.live',
  'sandbox.dead',
  'sandbox.respawned',
  'sandbox.terminated',
  'sandbox.reaped',
  /** Replaced between cards on purpose (age, or too little lifetime left for the next card): no death. */
  'sandbox.recycled',
  /** Let go by an idle slot above minSlots: the next card makes a fresh one. */
  'sandbox.released',
  'slot.added',
  'slot.removed',
  'breaker.opened',
  'breaker.half-open',
  'breaker.closed',
]);
export type EventType = z.infer<typeof EventTypeSchema>;

export const LaneEventSchema = z.object({
  type: EventTypeSchema,
  at: z.string(),
  lane: z.string(),
  cardId: z.string().optional(),
  slot: z.string().optional(),
  sandboxId: z.string().optional(),
  data: z.record(z.string(), z.json()).optional(),
});
export type LaneEvent = z.infer<typeof LaneEventSchema>;

/**
 * `event: gap` on `/v1/events`: a resumed stream's events after `after` may have been trimmed from
 * Redis before it could replay them (the shared stream, or for a stream scoped to some lanes their own, keeps about 10,000 events);
 * the replay goes on from `oldest`, the oldest event still held. A board that needs every event
 * re-reads its cards (`GET /v1/cards`) instead.
 */
export const EventGapSchema = z.object({ after: StreamIdSchema, oldest: StreamIdSchema });
export type EventGap = z.infer<typeof EventGapSchema>;
