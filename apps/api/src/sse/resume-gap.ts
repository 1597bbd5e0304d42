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

/** What some lanes' own streams hold for a replay (EventLog.laneRange): each lane's window, and the id from which they hold every event. */
export interface LaneWindows {
  readonly windows: ReadonlyMap<string, ReplayWindow>;
  readonly since: string | undefined;
}

export type LaneResume = { use: 'lanes'; gap?: EventGap } | { use: 'shared' };

/**
 * Where a replay scoped to some lanes goes on once the shared stream has trimmed past its cursor:
 * from the lanes' own streams (libs/queue lane-event-streams.ts) when they vouch for the cursor,
 * which is when they held every event from before it (`since` at or before the cursor); then only
 * what they trimmed themselves is a gap, and another lane's burst is none. Before `since` (events
 * went to the shared stream alone) the shared stream's gap stands.
 */
export function laneResume(cursor: string, lanes: LaneWindows, toldBefore?: string): LaneResume {
  if (lanes.since === undefined || compareStreamIds(cursor, lanes.since) < 0) return { use: 'shared' };
  let gap: EventGap | undefined;
  for (const window of lanes.windows.values()) {
    const lost = resumeGap(cursor, window, toldBefore);
    if (lost && (gap === undefined || compareStreamIds(lost.oldest, gap.oldest) > 0)) gap = lost;
  }
  return gap ? { use: 'lanes', gap } : { use: 'lanes' };
}
