/** One server-sent event: `id` is empty for a frame that only moves the resume point. */
export interface SseFrame {
  id?: string;
  event?: string;
  data?: string;
}

/**
 * Splits a text/event-stream into frames as chunks arrive (a frame may straddle chunks).
 * Comment lines (`: …`) are dropped; multi-line `data:` is joined with newlines, as the spec says.
 */
export class SseFrameParser {
  private buffer = '';

  push(chunk: string): SseFrame[] {
    this.buffer += chunk.replace(/\r\n?/g, '\n');
    const frames: SseFrame[] = [];
    let end: number;
    while ((end = this.buffer.indexOf('\n\n')) !== -1) {
      const block = this.buffer.slice(0, end);
      this.buffer = this.buffer.slice(end + 2);
      const frame: SseFrame = {};
      const data: string[] = [];
      for (const line of block.split('\n')) {
        if (line === '' || line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const field = colon === -1 ? line : line.slice(0, colon);
        const value = colon === -1 ? '' : line.slice(colon + 1).replace(/^ /, '');
        if (field === 'id') frame.id = value;
        else if (field === 'event') frame.event = value;
        else if (field === 'data') data.push(value);
      }
      if (data.length) frame.data = data.join('\n');
      if (frame.id !== undefined || frame.data !== undefined) frames.push(frame);
    }
    return frames;
  }
}
