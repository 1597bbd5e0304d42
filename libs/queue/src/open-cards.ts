import type { Redis } from 'ioredis';
import type { LaneOpenCards } from '@lanes/contracts';
import { keys } from './names.js';

/**
 * A lane's bounds on what it holds open (queued, running or blocked): `maxOpenCards` and
 * `maxOpenBytes` of card JSON. The enqueue script enforces them in the same step it writes (see
 * enqueue-script.ts); what is here reads them, for the lane status and for the writes that check
 * first (a retry, and the one-card enqueue under a BullMQ lanes does not write itself).
 */
export interface OpenBounds {
  cards: number;
  bytes: number;
}

/** A batch refused because it would take a lane past its `maxOpenCards` (unit `cards`) or its `maxOpenBytes` (unit `bytes`). */
export interface LaneFull {
  lane: string;
  unit: 'cards' | 'bytes';
  /** The lane's open cards (queued, running or blocked), or their card JSON bytes, when the batch came. */
  open: number;
  /** The new cards, or their bytes, the batch would have added to the lane. */
  adding: number;
  max: number;
}

/** What a LANE_FULL says: the lane, what it holds and what would pass its bound. */
export function describeLaneFull(full: LaneFull): string {
  return full.unit === 'cards'
    ? `lane "${full.lane}" holds ${full.open} open cards (queued, running or blocked); ${full.adding} more would pass its maxOpenCards of ${full.max}`
    : `lane "${full.lane}" holds ${full.open} bytes of open cards (card JSON, queued, running or blocked); ${full.adding} more would pass its maxOpenBytes of ${full.max}`;
}

/** The bound one more card of `cardBytes` would pass on a lane holding `open`; undefined while it has room. */
export function laneFullFor(lane: string, open: LaneOpenCards, cardBytes: number): LaneFull | undefined {
  if (open.cards + 1 > open.maxCards) return { lane, unit: 'cards', open: open.cards, adding: 1, max: open.maxCards };
  if (open.bytes + cardBytes > open.maxBytes) return { lane, unit: 'bytes', open: open.bytes, adding: cardBytes, max: open.maxBytes };
  return undefined;
}

/**
 * Each lane's open cards (one ZCARD per state index) and their card JSON bytes (keys.openBytes), in
 * one round trip, against `bounds`. A lane with no open card holds no bytes, as the enqueue script
 * counts it, whatever a drifted count says.
 */
export async function readOpenCards(redis: Redis, lanes: ReadonlyArray<{ lane: string; bounds: OpenBounds }>): Promise<LaneOpenCards[]> {
  const pipeline = redis.pipeline();
  for (const { lane } of lanes) {
    for (const state of ['queued', 'running', 'blocked'] as const) pipeline.zcard(keys.cardIndex(lane, state));
    pipeline.get(keys.openBytes(lane));
  }
  const replies = (await pipeline.exec()) ?? [];
  return lanes.map(({ bounds }, i) => {
    const [queued = 0, running = 0, blocked = 0, bytes = 0] = replies.slice(i * 4, i * 4 + 4).map(([err, value]) => {
      if (err) throw err;
      return Number(value ?? 0);
    });
    const cards = queued + running + blocked;
    return { cards, maxCards: bounds.cards, bytes: cards === 0 ? 0 : bytes, maxBytes: bounds.bytes };
  });
}
