import type { ServerResponse } from 'node:http';
import { defaults, type EventGap } from '@lanes/contracts';
import type { FanoutSink } from './event-fanout.js';
import { gapFrame, type SseEvent } from './sse-event.js';

export interface SseStreamConfig {
  /** Unsent bytes a stream may hold; a frame that would pass it drops the stream. Default 256 KiB. */
  maxBufferedBytes: number;
  /** A stream with nothing sent for this long gets a comment line. Default 15 s. */
  keepaliveMs: number;
  /** A dropped stream's last frame may flush for this long before its socket is destroyed. Default 2 s. */
  endGraceMs: number;
}

export const DEFAULT_SSE_STREAM_CONFIG: SseStreamConfig = {
  maxBufferedBytes: defaults.DEFAULT_SSE_MAX_BUFFERED_BYTES,
  keepaliveMs: defaults.DEFAULT_SSE_KEEPALIVE_MS,
  endGraceMs: defaults.DEFAULT_SSE_END_GRACE_MS,
};

/**
 * Why a stream ended. Only `client-closed` is the client's doing; `card-ended` (a card's output
 * stream, after its end) has nothing more to send; the others tell it where to resume.
 */
export type SseEndReason = 'slow-consumer' | 'server-closing' | 'redis-unavailable' | 'card-ended' | 'client-closed';

/** `new` until its headers go out; `ending` while its last frame flushes; `closed` once its socket is gone. */
export type SseStreamState = 'new' | 'open' | 'ending' | 'closed';

const KEEPALIVE_FRAME = ': keepalive\n\n';
/** How often a paced stream looks at its unsent output while it waits below the socket's high-water mark. */
const DRAIN_POLL_MS = 5;
const KEEPALIVE_BYTES = Buffer.byteLength(KEEPALIVE_FRAME);

const END_COMMENTS: Record<Exclude<SseEndReason, 'client-closed'>, string> = {
  'slow-consumer': 'dropped: the client read too slowly',
  'server-closing': 'the server is closing',
  'redis-unavailable': 'events cannot be read from redis',
  'card-ended': 'the card has ended',
};

/**
 * Whether writing `frameBytes` more would pass the cap. An empty buffer takes any one frame, so an
 * event larger than the cap is still delivered instead of dropping every stream that reaches it.
 */
export function wouldOverflow(bufferedBytes: number, frameBytes: number, maxBufferedBytes: number): boolean {
  return bufferedBytes > 0 && bufferedBytes + frameBytes > maxBufferedBytes;
}

export interface SseStreamHooks {
  /** The stream stopped taking events (its last frame may still be flushing). */
  onEnd(reason: SseEndReason, resumeId: string): void;
  /** Its socket is gone. Called once. */
  onClose(): void;
}

/**
 * One client's `text/event-stream`: filters events by lane, keeps its unsent output under a byte cap
 * and drops itself when a frame would pass it. Its last frame, `id: <resume id>`, names where to
 * reconnect from (`Last-Event-ID`); it is the last id the stream considered, so nothing before it is lost.
 */
export class SseStream implements FanoutSink {
  private state: SseStreamState = 'new';
  private resumeId = '0-0';
  private wroteSinceTick = false;
  private keepalive: NodeJS.Timeout | undefined;

  constructor(
    private readonly res: ServerResponse,
    private readonly accepts: (lane: string) => boolean,
    private readonly config: SseStreamConfig,
    private readonly hooks: SseStreamHooks,
  ) {
    res.once('close', () => this.closed());
  }

  get isOpen(): boolean {
    return this.state === 'new' || this.state === 'open';
  }

  get status(): SseStreamState {
    return this.state;
  }

  begin(afterId: string): void {
    if (this.state !== 'new') return;
    this.state = 'open';
    this.resumeId = afterId;
    this.res.writeHead(200, {
      'content-type': 'text/event-stream',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    // An id-only frame hands the client its resume point before any event: one that drops early resumes here.
    this.res.write(`: lanes events\nid: ${afterId}\n\n`);
    this.keepalive = setInterval(() => this.tick(), this.config.keepaliveMs).unref();
  }

  push(events: readonly SseEvent[]): void {
    if (this.state !== 'open') return;
    for (const e of events) {
      if (this.accepts(e.lane)) {
        if (wouldOverflow(this.res.writableLength, e.bytes, this.config.maxBufferedBytes)) {
          this.end('slow-consumer');
          return;
        }
        this.res.write(e.frame);
        this.wroteSinceTick = true;
      }
      this.resumeId = e.id;
    }
  }

  /** `event: gap` with `{after, oldest}` and no id: it moves no resume point, so a reconnect replays what follows it. */
  gap(gap: EventGap): void {
    if (this.state !== 'open') return;
    const frame = gapFrame(gap);
    if (wouldOverflow(this.res.writableLength, Buffer.byteLength(frame), this.config.maxBufferedBytes)) {
      this.end('slow-consumer');
      return;
    }
    this.res.write(frame);
    this.wroteSinceTick = true;
  }

  /**
   * Its unsent output has reached the pacing mark: the socket's high-water mark, or half the cap when
   * that is lower. Node 22 raised the default high-water mark to 64 KiB, above a small cap, so a
   * catch-up paced by the high-water mark alone overflowed the cap and dropped a healthy client.
   */
  get needsDrain(): boolean {
    return this.state === 'open' && (this.res.writableNeedDrain || this.res.writableLength >= this.paceBytes);
  }

  private get paceBytes(): number {
    return Math.min(this.res.writableHighWaterMark, Math.floor(this.config.maxBufferedBytes / 2));
  }

  /** Resolves once the output is below the pacing mark again, or the stream has ended. */
  drained(): Promise<void> {
    if (!this.needsDrain) return Promise.resolve();
    return new Promise((resolve) => {
      // 'drain' comes only after a write the socket refused; below its high-water mark the buffer is watched instead.
      const watch = setInterval(() => {
        if (!this.needsDrain) done();
      }, DRAIN_POLL_MS).unref();
      const done = () => {
        clearInterval(watch);
        this.res.off('drain', done);
        this.res.off('close', done);
        resolve();
      };
      this.res.on('drain', done);
      this.res.on('close', done);
    });
  }

  /** Stops the stream: a last comment and `id:` frame, then the end; a socket that will not flush is destroyed after the grace. */
  end(reason: Exclude<SseEndReason, 'client-closed'>): void {
    if (this.state === 'new') {
      this.discard();
      return;
    }
    if (this.state !== 'open') return;
    this.state = 'ending';
    clearInterval(this.keepalive);
    this.hooks.onEnd(reason, this.resumeId);
    this.res.write(`: ${END_COMMENTS[reason]}; reconnect with Last-Event-ID\nid: ${this.resumeId}\n\n`);
    // The connection goes with the stream; a socket that will not flush within the grace is destroyed.
    const socket = this.res.socket;
    this.res.end(() => socket?.end());
    if (!socket) return;
    const grace = setTimeout(() => socket.destroy(), this.config.endGraceMs).unref();
    socket.once('close', () => clearTimeout(grace));
  }

  /** Gives up a stream that never began (its request failed first): it stops counting, and its socket stays the server's. */
  discard(): void {
    if (this.state !== 'new') return;
    this.state = 'closed';
    this.hooks.onClose();
  }

  private tick(): void {
    if (this.state !== 'open') return;
    if (!this.wroteSinceTick) {
      if (wouldOverflow(this.res.writableLength, KEEPALIVE_BYTES, this.config.maxBufferedBytes)) {
        this.end('slow-consumer');
        return;
      }
      this.res.write(KEEPALIVE_FRAME);
    }
    this.wroteSinceTick = false;
  }

  private closed(): void {
    if (this.state === 'closed') return;
    const wasOpen = this.isOpen;
    this.state = 'closed';
    clearInterval(this.keepalive);
    if (wasOpen) this.hooks.onEnd('client-closed', this.resumeId);
    this.hooks.onClose();
  }
}
