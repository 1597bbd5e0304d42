import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { IllegalStateError, compareStreamIds, type EventGap } from '@lanes/contracts';
import { EventLog, type EventPage, type ReplayWindow } from '@lanes/queue';
import { laneResume, resumeGap } from './resume-gap.js';
import { toSseEvent, type SseEvent } from './sse-event.js';

/** Each blocking read waits at most this long, so a half-open connection is noticed. */
export const FANOUT_BLOCK_MS = 5_000;
/** Events per live read: one read's frames reach every stream at once, so this bounds one push (~0.3–1 KiB each). */
export const FANOUT_BATCH_EVENTS = 100;
/** Events per catch-up read; a stream waits for its socket to drain between pages, so this bounds what catch-up buffers. */
export const CATCH_UP_PAGE_EVENTS = 100;
/** After a failed read the reader waits this long before the next. */
export const FANOUT_RETRY_DELAY_MS = 500;

/** What the fanout feeds: one SSE stream. */
export interface FanoutSink {
  /** False once the stream has ended: the fanout forgets it. */
  readonly isOpen: boolean;
  /** The stream starts after this id (announced to the client as its first resume point). */
  begin(afterId: string): void;
  /** Events after the resume point may have been trimmed before they were replayed (resume-gap.ts; the event fan-out's sinks only). */
  gap?(gap: EventGap): void;
  /** Events in stream order, each batch after the previous one, none twice. */
  push(events: readonly SseEvent[]): void;
  /** Its socket holds more than it takes at once: catch-up waits for `drained()` before the next event. */
  readonly needsDrain: boolean;
  /** Resolves once the stream's socket has flushed, or the stream has ended. */
  drained(): Promise<void>;
  /** Ends the stream with its resume id, so the client reconnects from it (a replay Redis could not serve). */
  end?(reason: 'redis-unavailable'): void;
}

export interface EventFanoutOptions {
  /** The API's shared connection: the tail and catch-up reads go on it (never blocking). One duplicate does the blocking reads. */
  redis: Redis;
  log: Logger;
  blockMs?: number;
}

/** `idle` until the first stream; `running` while the one reader reads; `stopped` for good. */
export type FanoutState = 'idle' | 'starting' | 'running' | 'stopped';

/**
 * One Redis reader per API process feeding every SSE stream: a single `XREAD BLOCK` loop on one
 * dedicated connection, each event parsed and rendered once and pushed to every live sink.
 *
 * A stream that resumes catches up with bounded `XRANGE` pages on the shared connection, then joins
 * the live set. The seam holds because joining is synchronous: the reader delivers a batch and moves
 * `lastId` in one step, so a sink that has read up to `lastId` and is added before the next await
 * gets exactly what follows. A sink that asked to start past `lastId` skips what it has already seen.
 */
export class EventFanout {
  private state: FanoutState = 'idle';
  private starting: Promise<void> | undefined;
  private loop: Promise<void> | undefined;
  /** The last entry read and delivered to every live sink. */
  private lastId = '0-0';
  /** Live sinks, each with the id it has seen up to when that is past `lastId`. */
  private readonly sinks = new Map<FanoutSink, string | undefined>();
  private readonly shared: EventLog;
  private blocking: Redis | undefined;
  private readonly stopping = new AbortController();
  private gaps = 0;
  /** The `oldest` of the last gap each sink was told, so the catch-up and the live reader never tell one hole twice. */
  private readonly toldBefore = new WeakMap<FanoutSink, string>();
  /** The lanes a sink was attached for: their own streams can replay what the shared stream's trim took from it. */
  private readonly sinkLanes = new WeakMap<FanoutSink, ReadonlySet<string>>();

  constructor(private readonly options: EventFanoutOptions) {
    this.shared = new EventLog(options.redis);
  }

  get status(): FanoutState {
    return this.state;
  }

  /** Live sinks (streams still catching up are not counted). */
  /** Gaps told to streams since start: once per stream the trim passed. */
  get gapsTold(): number {
    return this.gaps;
  }

  get liveSinks(): number {
    return this.sinks.size;
  }

  /**
   * Feeds `sink` every event after `afterId` (undefined: from now on): first the catch-up from Redis,
   * then the live events. Resolves once the sink is live or has ended; throws when Redis cannot be read.
   */
  async attach(sink: FanoutSink, afterId?: string, lanes?: ReadonlySet<string>): Promise<void> {
    await this.start();
    let cursor = afterId ?? this.lastId;
    if (lanes?.size) this.sinkLanes.set(sink, lanes);
    sink.begin(cursor);
    for (;;) {
      if (!sink.isOpen || this.state === 'stopped') return;
      const ahead = compareStreamIds(cursor, this.lastId);
      if (ahead >= 0) {
        this.sinks.set(sink, ahead > 0 ? cursor : undefined);
        return;
      }
      const target = this.lastId;
      const page = await this.catchUpPage(sink, cursor, target, lanes);
      if (!sink.isOpen) return;
      if (page.gap) this.tellGap(sink, page.gap);
      // An empty page means nothing is left up to the target (trimmed, or entries that did not decode).
      cursor = page.lastId ?? target;
      // Paced by the client: one event at a time while its socket takes them, so catch-up never overflows it.
      for (const e of page.events) {
        if (!sink.isOpen) return;
        sink.push([toSseEvent(e)]);
        if (sink.needsDrain) await sink.drained();
      }
    }
  }

  /**
   * One page of a replay, with what it lost to the trim. Checked at every page: a client that reads
   * slowly can be overtaken by the trim mid-replay. A replay scoped to `lanes` that the shared
   * stream's trim passed reads their own streams instead, where they vouch for it (laneResume).
   */
  private async catchUpPage(sink: FanoutSink, cursor: string, target: string, lanes: ReadonlySet<string> | undefined): Promise<EventPage & { gap?: EventGap }> {
    const told = this.toldBefore.get(sink);
    const page = await this.shared.range(cursor, target, CATCH_UP_PAGE_EVENTS);
    const gap = resumeGap(cursor, page.window, told);
    if (!gap || !lanes?.size || !sink.isOpen) return gap ? { ...page, gap } : page;
    const own = await this.shared.laneRange([...lanes], cursor, target, CATCH_UP_PAGE_EVENTS);
    const resume = laneResume(cursor, own, told);
    if (resume.use === 'shared') return { ...page, gap };
    return resume.gap ? { ...own, gap: resume.gap } : own;
  }

  detach(sink: FanoutSink): void {
    this.sinks.delete(sink);
  }

  /** Stops the reader and closes its connection. Sinks are the caller's to end. */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.stopping.abort();
    this.sinks.clear();
    this.blocking?.disconnect();
    await this.loop;
  }

  /** Pins the start at the stream's tail and starts the reader, once; a failed start is retried by the next call. */
  start(): Promise<void> {
    if (this.state === 'stopped') return Promise.reject(new IllegalStateError('the event fan-out is stopped'));
    this.starting ??= (async () => {
      this.state = 'starting';
      this.lastId = await this.shared.tailId();
      if (this.state !== 'starting') return;
      // Commands wait out a Redis restart on this connection instead of failing: the reader resumes after lastId.
      this.blocking = this.options.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
      this.blocking.on('error', () => undefined); // a failed read is logged by the loop
      this.state = 'running';
      this.loop = this.run(new EventLog(this.blocking));
    })().catch((err: unknown) => {
      if (this.state === 'starting') this.state = 'idle';
      this.starting = undefined;
      throw err;
    });
    return this.starting;
  }

  private async run(log: EventLog): Promise<void> {
    let failing = false;
    while (this.state === 'running') {
      try {
        const page = await log.readPage(this.lastId, this.options.blockMs ?? FANOUT_BLOCK_MS, FANOUT_BATCH_EVENTS);
        if (failing) this.options.log.info('sse.fanout.recovered');
        failing = false;
        if (this.state !== 'running' || page.lastId === undefined) continue;
        // A burst of about 10,000 events faster than this reader reads can pass it too.
        this.tellGaps(page.window);
        this.lastId = page.lastId;
        if (page.events.length) this.deliver(page.events.map(toSseEvent));
      } catch (err) {
        if (this.state !== 'running') return;
        if (!failing) this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sse.fanout.read_failed');
        failing = true;
        await delay(FANOUT_RETRY_DELAY_MS, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
  }

  /**
   * Each live sink whose point in the stream the trim passed: one scoped to some lanes leaves the
   * live feed and replays from there (attach: from its lanes' own streams where they vouch for it,
   * so a burst of other lanes costs it nothing), then rejoins; any other is told of the gap before
   * the next batch.
   */
  private tellGaps(window: ReplayWindow): void {
    for (const [sink, seenUpTo] of this.sinks) {
      const from = seenUpTo ?? this.lastId;
      const gap = resumeGap(from, window, this.toldBefore.get(sink));
      if (!gap) continue;
      const lanes = this.sinkLanes.get(sink);
      if (!lanes) {
        this.tellGap(sink, gap);
        continue;
      }
      this.sinks.delete(sink);
      this.attach(sink, from, lanes).catch((err: unknown) => {
        this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sse.replay_failed');
        sink.end?.('redis-unavailable');
      });
    }
  }

  private tellGap(sink: FanoutSink, gap: EventGap): void {
    this.toldBefore.set(sink, gap.oldest);
    this.gaps++;
    this.options.log.warn({ after: gap.after, oldest: gap.oldest }, 'sse.gap');
    sink.gap?.(gap);
  }

  private deliver(batch: readonly SseEvent[]): void {
    deliverToSinks(this.sinks, batch);
  }
}

/**
 * One live batch to every open sink (a closed one is forgotten). A sink that joined past the
 * reader's last id (it had seen more) gets only what is after what it has seen, then everything.
 */
export function deliverToSinks(sinks: Map<FanoutSink, string | undefined>, batch: readonly SseEvent[]): void {
  for (const [sink, seenUpTo] of sinks) {
    if (!sink.isOpen) {
      sinks.delete(sink);
      continue;
    }
    if (seenUpTo === undefined) {
      sink.push(batch);
      continue;
    }
    const fresh = batch.filter((e) => compareStreamIds(e.id, seenUpTo) > 0);
    if (fresh.length) {
      sinks.set(sink, undefined);
      sink.push(fresh);
    }
  }
}
