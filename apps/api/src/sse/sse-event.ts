import type { CardState, EventGap } from '@lanes/contracts';
import type { OutputEntry, StoredEvent } from '@lanes/queue';

/** One event rendered once as an SSE frame, shared by every stream that sends it. */
export interface SseEvent {
  id: string;
  lane: string;
  frame: string;
  /** The frame's length in bytes, for the buffer cap. */
  bytes: number;
  /** A card output stream's end entry: the run ended in this state. */
  end?: CardState;
}

export function toSseEvent(e: StoredEvent): SseEvent {
  const frame = `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
  return { id: e.id, lane: e.lane, frame, bytes: Buffer.byteLength(frame) };
}

/** `event: gap` with `{after, oldest}` and no id: it moves no resume point. */
export function gapFrame(gap: EventGap): string {
  return `event: gap\ndata: ${JSON.stringify(gap)}\n\n`;
}

/**
 * A card's output entry as a frame: `event: output` with `{lines}` (JSON, so no carriage return or
 * newline an agent prints can break the framing), or `event: end` with `{state}`. Output trimmed
 * before it (`gap`) is told in the same frame, so no stream sends one without the other.
 */
export function toOutputEvent(e: OutputEntry, lane: string, gap?: EventGap): SseEvent {
  const [type, data] = e.kind === 'lines' ? ['output', { lines: e.lines }] : ['end', { state: e.state }];
  const frame = `${gap ? gapFrame(gap) : ''}id: ${e.id}\nevent: ${type}\ndata: ${JSON.stringify(data)}\n\n`;
  return { id: e.id, lane, frame, bytes: Buffer.byteLength(frame), ...(e.kind === 'end' ? { end: e.state } : {}) };
}
