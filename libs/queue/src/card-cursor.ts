import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { BlockedReason, CardState } from '@lanes/contracts';

/**
 * Where a listing stands in its index order (score descending, then id descending, bytewise):
 * every entry at or before it has been considered. The first page stands at `(snapshot, '')`:
 * everything scored at or after the snapshot is outside the listing.
 */
export interface CardListPosition {
  score: number;
  id: string;
}

/** What a listing filters on; a cursor is good for the filter it was made for only. */
export interface CardListFilter {
  state?: CardState;
  blockedReason?: BlockedReason;
  updatedSinceMs?: number;
  /** The lane asked for by name; absent for every lane the caller may see. */
  lane?: string;
}

/** A listing between two pages: the snapshot fixed by its first page, and where the last page ended. */
export interface CardListCursor {
  snapshotMs: number;
  position: CardListPosition;
  /** The filter's fingerprint (filterFingerprint). */
  filter: string;
}

const CURSOR_VERSION = 1;
const CursorSchema = z.tuple([z.literal(CURSOR_VERSION), z.number().int().nonnegative(), z.number().int(), z.string().max(128), z.string()]);

/** A short digest of the filter, so a cursor handed to another query is refused rather than misread. */
export function filterFingerprint(filter: CardListFilter): string {
  const canonical = JSON.stringify([filter.lane ?? '', filter.state ?? '', filter.blockedReason ?? '', filter.updatedSinceMs ?? '']);
  return createHash('sha256').update(canonical).digest('base64url').slice(0, 12);
}

/** Opaque to clients: base64url of a versioned tuple. */
export function encodeCardCursor(cursor: CardListCursor): string {
  return Buffer.from(JSON.stringify([CURSOR_VERSION, cursor.snapshotMs, cursor.position.score, cursor.position.id, cursor.filter])).toString('base64url');
}

export type CursorDecoding = { ok: true; cursor: CardListCursor } | { ok: false; reason: string };

/** Reads a cursor back, for this filter; a malformed one, or one made for another filter, is refused with why. */
export function decodeCardCursor(raw: string, filter: CardListFilter): CursorDecoding {
  let json: unknown;
  try {
    json = JSON.parse(Buffer.from(raw, 'base64url').toString('utf8'));
  } catch {
    return { ok: false, reason: 'is not a cursor this API made (pass nextCursor as it was given)' };
  }
  const parsed = CursorSchema.safeParse(json);
  if (!parsed.success) return { ok: false, reason: 'is not a cursor this API made (pass nextCursor as it was given)' };
  const [, snapshotMs, score, id, fingerprint] = parsed.data;
  if (fingerprint !== filterFingerprint(filter)) return { ok: false, reason: 'was made for another filter: keep lane, state, blockedReason and updatedSince as on the first page' };
  return { ok: true, cursor: { snapshotMs, position: { score, id }, filter: fingerprint } };
}
