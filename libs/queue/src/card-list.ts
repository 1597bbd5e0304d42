import type { Redis } from 'ioredis';
import { CardStateSchema, type CardPage, type CardState, type CardSummary } from '@lanes/contracts';
import { decodeCardCursor, encodeCardCursor, filterFingerprint, type CardListFilter, type CardListPosition } from './card-cursor.js';
import { CardHashSchema, recordOf } from './card-hash.js';
import { definePageScript, pageScriptArgs, parsePageReply, type IndexSource, type PageEntry } from './card-page-script.js';
import { keys } from './names.js';

/**
 * Stale index entries (cards that expired, ids made again) one page may skip and remove beyond the
 * cards it answers, so a page's work stays bounded; a page that reaches it ends early with a cursor.
 */
export const CARD_LIST_STALE_SKIP_MAX = 500;

export interface CardListDeps {
  redis: Redis;
  now: () => number;
}

/** One page asked for. `lanes`: the lanes the caller may see and asked for (the API applies scope). */
export interface CardListRequest extends CardListFilter {
  lanes: readonly string[];
  limit: number;
  /** The `nextCursor` of the page before. */
  cursor?: string;
}

export type CardListResult = { ok: true; page: CardPage } | { ok: false; issue: 'cursor'; message: string };

/**
 * The index sets a filter reads, each card in at most one of them: a state's set per lane, or for
 * blocked cards of one reason that reason's set; with no state, every state's set of each lane.
 */
export function indexSourcesFor(lanes: readonly string[], filter: Pick<CardListFilter, 'state' | 'blockedReason'>): IndexSource[] {
  const state = filter.blockedReason !== undefined ? 'blocked' : filter.state;
  const states: readonly CardState[] = state === undefined ? CardStateSchema.options : [state];
  return lanes.flatMap((lane) =>
    states.map((s): IndexSource => {
      if (s === 'blocked' && filter.blockedReason !== undefined)
        return { key: keys.blockedReasonIndex(lane, filter.blockedReason), lane, state: s, blockedReason: filter.blockedReason };
      return { key: keys.cardIndex(lane, s), lane, state: s };
    }),
  );
}

/**
 * `GET /v1/cards`: pages of cards, newest update first, read from the listing indexes in one
 * script per page (card-page-script.ts), so a page costs O(sets × page), never O(cards).
 *
 * The guarantee, while cards keep moving: the first page fixes a snapshot (`snapshotAt`, now), and
 * the listing is of cards whose last move came before it, in one order (score descending, then id).
 * A card's score is its last move's time and never goes down (card-script.ts), and each page starts
 * strictly after where the last ended, so
 *   - no card is answered twice in one listing: a card that moves after being answered scores at or
 *     above its old place, which the listing has passed;
 *   - every card that fits the filter at the snapshot and does not move until the listing ends is
 *     answered exactly once;
 *   - a card that moves during the listing is answered at most once: as it was where the listing met
 *     it, if it still fitted there; not at all if it moved away first. Its move is after the snapshot
 *     (clocks alike), so `updatedSince=<snapshotAt>` lists it, with no overlap.
 * Each card answered fitted the filter when its page was read (checked against its record in the
 * same step).
 */
export class CardList {
  constructor(private readonly deps: CardListDeps) {
    definePageScript(deps.redis);
  }

  async page(request: CardListRequest): Promise<CardListResult> {
    const filter: CardListFilter = {
      ...(request.lane !== undefined ? { lane: request.lane } : {}),
      ...(request.state !== undefined ? { state: request.state } : {}),
      ...(request.blockedReason !== undefined ? { blockedReason: request.blockedReason } : {}),
      ...(request.updatedSinceMs !== undefined ? { updatedSinceMs: request.updatedSinceMs } : {}),
    };
    let snapshotMs: number;
    let position: CardListPosition;
    if (request.cursor !== undefined) {
      const decoded = decodeCardCursor(request.cursor, filter);
      if (!decoded.ok) return { ok: false, issue: 'cursor', message: decoded.reason };
      ({ snapshotMs, position } = decoded.cursor);
    } else {
      snapshotMs = this.deps.now();
      position = { score: snapshotMs, id: '' };
    }
    const snapshotAt = new Date(snapshotMs).toISOString();
    const sources = indexSourcesFor(request.lanes, filter);
    if (sources.length === 0) return { ok: true, page: { cards: [], snapshotAt } };
    const args = pageScriptArgs({
      sources,
      position,
      ...(request.updatedSinceMs !== undefined ? { minScore: request.updatedSinceMs } : {}),
      limit: request.limit,
      budget: request.limit + CARD_LIST_STALE_SKIP_MAX,
    });
    const reply = parsePageReply(await this.deps.redis.lanesCardPage(...args));
    const cards = reply.entries.map(summaryOf);
    const nextCursor = reply.more ? encodeCardCursor({ snapshotMs, position: reply.position, filter: filterFingerprint(filter) }) : undefined;
    return { ok: true, page: { cards, ...(nextCursor ? { nextCursor } : {}), snapshotAt } };
  }
}

/** A card as a listing shows it: its record without prompt, metadata or history. */
function summaryOf(entry: PageEntry): CardSummary {
  const hash = CardHashSchema.parse(Object.fromEntries(Object.entries(entry.fields).filter(([, v]) => v !== null)));
  const { prompt: _prompt, metadata: _metadata, history: _history, historyDropped: _dropped, ...summary } = recordOf(hash, []);
  return summary;
}
