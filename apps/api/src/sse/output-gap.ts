import type { EventGap } from '@lanes/contracts';
import type { OutputEntry, OutputPosition } from '@lanes/queue';

/**
 * Whether output was trimmed between a reader's position and the next entry it gets: each entry
 * says where it lies in the bytes the card printed, and consecutive ones meet. A position no longer
 * held (a reader resuming more than the card's output budget behind) has no byte count: then any
 * trimmed output before the entry counts, as the reader may not have seen it.
 */
export function outputGap(at: OutputPosition, next: OutputEntry): EventGap | undefined {
  if (next.bytes === undefined) return undefined;
  const trimmed = at.through === undefined ? next.bytes.before > 0 : next.bytes.before > at.through;
  return trimmed ? { after: at.id, oldest: next.id } : undefined;
}

/** The position after `entry`. */
export function positionAfter(entry: OutputEntry): OutputPosition {
  return { id: entry.id, through: entry.bytes?.through };
}
