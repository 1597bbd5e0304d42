import { setTimeout as delay } from 'node:timers/promises';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { IllegalStateError, compareStreamIds, type EventGap } from '@lanes/contracts';
import { CardOutput, type OutputEntry, type OutputPosition } from '@lanes/queue';
import { deliverToSinks, type FanoutSink } from './event-fanout.js';
import { outputGap, positionAfter } from './output-gap.js';
import { toOutputEvent } from './sse-event.js';

/**
 * Each blocking read waits at most this long. A card joining the read is woken into it with
 * `CLIENT UNBLOCK`; one that joins while a read is being sent waits at most this for its first
 * live lines, so it is short (a card prints at human pace; one read per second per process is nothing).
 */
export const OUTPUT_FANOUT_BLOCK_MS = 1_000;
/** Entries per card per live read: one entry is a batch of lines, at most CARD_OUTPUT_MAX_BYTES in all. */
export const OUTPUT_FANOUT_BATCH_ENTRIES = 50;
/** Entries per catch-up read; a stream waits for its socket to drain between entries. */
export const OUTPUT_CATCH_UP_PAGE_ENTRIES = 50;
/** After a failed read the reader waits this long before the next. */
export const OUTPUT_FANOUT_RETRY_DELAY_MS = 500;

export interface OutputFanoutOptions {
  /** The API's shared connection: catch-up reads and the wake-up go on it. One duplicate does the blocking reads. */
  redis: Redis;
  log: Logger;
  blockMs?: number;
}

interface Watched {
  lane: string;
  /** The last entry read and delivered to every live sink of the card. */
  lastId: string;
  /** The bytes the card had printed through `lastId`, to tell output trimmed before the reader got it. */
  through: number | undefined;
  /** Live sinks, each with the id it has seen up to when that is past `lastId`. */
  sinks: Map<FanoutSink, string | undefined>;
  /** Sinks still catching up: the card stays in the read while any is. */
  attaching: number;
}

/** `idle` until the first stream; `running` while the one reader reads; `stopped` for good. */
export type OutputFanoutState = 'idle' | 'running' | 'stopped';

/**
 * One Redis reader per API process for every card's output stream (`GET /v1/cards/:id/output`): a
 * single `XREAD BLOCK` over the output streams of the cards someone watches, each entry rendered
 * once and pushed to every sink of its card. It follows EventFanout's seam: a sink catches up with
 * bounded XRANGE pages up to the card's `lastId`, then joins the live set in the same synchronous
 * step, so it gets every entry after its resume id once.
 */
export class OutputFanout {
  private state: OutputFanoutState = 'idle';
  private loop: Promise<void> | undefined;
  private readonly watched = new Map<string, Watched>();
  private readonly shared: CardOutput;
  private blocking: Redis | undefined;
  private blockingId: number | undefined;
  private wake: (() => void) | undefined;
  private readonly stopping = new AbortController();
  private gaps = 0;

  constructor(private readonly options: OutputFanoutOptions) {
    this.shared = new CardOutput(options.redis);
  }

  get status(): OutputFanoutState {
    return this.state;
  }

  private get isStopped(): boolean {
    return this.state === 'stopped';
  }

  /** Gaps found since start: once per catch-up that found one, once per live one (told to every stream of the card). */
  get gapsTold(): number {
    return this.gaps;
  }

  /** Cards in the live read. */
  get watchedCards(): number {
    return this.watched.size;
  }

  /**
   * Feeds `sink` every entry of the card's output after `afterId` ('0-0': all that is held): the
   * catch-up, then live entries. Resolves once the sink is live or has ended; throws when Redis cannot be read.
   * Answers the id the sink has seen up to.
   */
  async attach(cardId: string, lane: string, sink: FanoutSink, afterId = '0-0'): Promise<string> {
    if (this.state === 'stopped') throw new IllegalStateError('the output fan-out is stopped');
    this.start();
    let watched = this.watched.get(cardId);
    if (!watched) {
      const tail = await this.shared.tailPosition(cardId);
      watched = this.watched.get(cardId);
      if (!watched) {
        watched = { lane, lastId: tail.id, through: tail.through, sinks: new Map(), attaching: 0 };
        this.watched.set(cardId, watched);
        this.rouse();
      }
    }
    watched.attaching++;
    try {
      let cursor = afterId;
      sink.begin(cursor);
      let position = await this.shared.positionOf(cardId, afterId);
      for (;;) {
        if (!sink.isOpen || this.isStopped) return cursor;
        const ahead = compareStreamIds(cursor, watched.lastId);
        if (ahead >= 0) {
          watched.sinks.set(sink, ahead > 0 ? cursor : undefined);
          return cursor;
        }
        const target = watched.lastId;
        let page = await this.shared.range(cardId, cursor, OUTPUT_CATCH_UP_PAGE_ENTRIES, target);
        // Nothing left up to the reader's point: the trim passed it too. What the sink missed shows
        // only against the next entry held, which the reader may not have read yet (and, meeting
        // what it read, would carry no gap), so that entry comes from here, past the reader's point.
        if (page.lastId === undefined) page = await this.shared.range(cardId, cursor, OUTPUT_CATCH_UP_PAGE_ENTRIES);
        cursor = page.lastId ?? target;
        for (const e of page.entries) {
          if (!sink.isOpen) return cursor;
          sink.push([toOutputEvent(e, lane, this.gapBefore(cardId, position, e))]);
          position = positionAfter(e);
          if (sink.needsDrain) await sink.drained();
        }
      }
    } finally {
      watched.attaching--;
      this.forgetIfUnwatched(cardId, watched);
    }
  }

  detach(cardId: string, sink: FanoutSink): void {
    const watched = this.watched.get(cardId);
    if (!watched) return;
    watched.sinks.delete(sink);
    this.forgetIfUnwatched(cardId, watched);
  }

  /** Stops the reader and closes its connection. Sinks are the caller's to end. */
  async stop(): Promise<void> {
    if (this.state === 'stopped') return;
    this.state = 'stopped';
    this.stopping.abort();
    this.watched.clear();
    this.wake?.();
    this.blocking?.disconnect();
    await this.loop;
  }

  private forgetIfUnwatched(cardId: string, watched: Watched): void {
    if (watched.sinks.size === 0 && watched.attaching === 0 && this.watched.get(cardId) === watched) this.watched.delete(cardId);
  }

  private start(): void {
    if (this.state !== 'idle') return;
    // Commands wait out a Redis restart on this connection instead of failing: the reader resumes after each card's lastId.
    this.blocking = this.options.redis.duplicate({ enableOfflineQueue: true, maxRetriesPerRequest: null });
    this.blocking.on('error', () => undefined); // a failed read is logged by the loop
    this.state = 'running';
    this.loop = this.run(new CardOutput(this.blocking), this.blocking);
  }

  /** A card joined: the read in progress (which does not name it) returns now, and the next names it. */
  private rouse(): void {
    this.wake?.();
    if (this.blockingId !== undefined) void this.options.redis.client('UNBLOCK', this.blockingId).catch(() => undefined);
  }

  private async run(reader: CardOutput, connection: Redis): Promise<void> {
    let failing = false;
    while (this.state === 'running') {
      if (this.watched.size === 0) {
        await new Promise<void>((resolve) => {
          this.wake = resolve;
        });
        this.wake = undefined;
        continue;
      }
      try {
        this.blockingId ??= Number(await connection.client('ID'));
        const after = new Map([...this.watched].map(([id, w]) => [id, w.lastId]));
        const pages = await reader.readMany(after, this.options.blockMs ?? OUTPUT_FANOUT_BLOCK_MS, OUTPUT_FANOUT_BATCH_ENTRIES);
        if (failing) this.options.log.info('sse.output_fanout.recovered');
        failing = false;
        for (const [cardId, page] of pages) {
          const watched = this.watched.get(cardId);
          if (!watched || page.lastId === undefined || compareStreamIds(page.lastId, watched.lastId) <= 0) continue;
          const fresh = page.entries.filter((e) => compareStreamIds(e.id, watched.lastId) > 0);
          if (fresh.length) this.deliver(cardId, watched, fresh);
          watched.lastId = page.lastId;
        }
      } catch (err) {
        if (this.state !== 'running') return;
        // A reconnected connection has a new client id.
        this.blockingId = undefined;
        if (!failing) this.options.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'sse.output_fanout.read_failed');
        failing = true;
        await delay(OUTPUT_FANOUT_RETRY_DELAY_MS, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
  }

  /** Entries after `watched.lastId`, each with the output trimmed before it told (the live reader can fall a budget behind a flood). */
  private deliver(cardId: string, watched: Watched, entries: readonly OutputEntry[]): void {
    let position: OutputPosition = { id: watched.lastId, through: watched.through };
    const events = entries.map((e) => {
      const event = toOutputEvent(e, watched.lane, this.gapBefore(cardId, position, e));
      position = positionAfter(e);
      return event;
    });
    watched.through = position.through;
    deliverToSinks(watched.sinks, events);
  }

  private gapBefore(cardId: string, at: OutputPosition, next: OutputEntry): EventGap | undefined {
    const gap = outputGap(at, next);
    if (gap) {
      this.gaps++;
      this.options.log.warn({ cardId, after: gap.after, oldest: gap.oldest }, 'sse.output_gap');
    }
    return gap;
  }
}
