import { compareStreamIds, type EventGap } from '@lanes/contracts';
import type { ReplayWindow } from '@lanes/queue';

/**
 * Whether a replay from `cursor` may have lost events: the stream has trimmed entries and its oldest
 * held one comes after the cursor. Trimmed entries all came before the oldest held one, but whether
 * any came after the cursor is not recorded, so a cursor that was itself the last one trimmed reads
 * as a gap too: a board told of a gap that was not there re-reads its cards; one not told loses events.
 *
 * `toldBefore` is the `oldest` of the last gap this reader was told. Everything trimmed before it is
 * already told, so a window that starts no later says nothing new: a replay that caught up to a point
 * the live reader had not passed would otherwise be told the same hole twice, once by the catch-up
 * and once by the live reader that the same trim overtook.
 */
export function resumeGap(cursor: string, window: ReplayWindow, toldBefore?: string): EventGap | undefined {
  if (!window.trimmed || window.firstId === undefined) return undefined;
  if (toldBefore !== undefined && compareStreamIds(window.firstId, toldBefore) <= 0) return undefined;
  return compareStreamIds(cursor, window.firstId) < 0 ? { after: cursor, oldest: window.firstId } : undefined;
}
