import { compareStreamIds, type EventGap } from '@lanes/contracts';
import type { ReplayWindow } from '@lanes/queue';

/**
 * Whether a replay from `cursor` may have lost events: the stream has trimmed entries and its oldest
 * held one comes after the cursor. Trimmed entries all came before the oldest held one, but whether
 * any came after the cursor is not recorded, so a cursor that was itself the last one trimmed reads
 * as a gap too: a board told of a gap that was not there re-reads its cards; one not told loses events.
 */
export function resumeGap(cursor: string, window: ReplayWindow): EventGap | undefined {
  if (!window.trimmed || window.firstId === undefined) return undefined;
  return compareStreamIds(cursor, window.firstId) < 0 ? { after: cursor, oldest: window.firstId } : undefined;
}
