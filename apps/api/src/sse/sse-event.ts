import type { StoredEvent } from '@lanes/queue';

/** One event rendered once as an SSE frame, shared by every stream that sends it. */
export interface SseEvent {
  id: string;
  lane: string;
  frame: string;
  /** The frame's length in bytes, for the buffer cap. */
  bytes: number;
}

export function toSseEvent(e: StoredEvent): SseEvent {
  const frame = `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`;
  return { id: e.id, lane: e.lane, frame, bytes: Buffer.byteLength(frame) };
}
