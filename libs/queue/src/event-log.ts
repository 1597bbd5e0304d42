import type { Redis } from 'ioredis';
import { LaneEventSchema, type LaneEvent } from '@lanes/contracts';
import { keys } from './names.js';

/** Bounded so the stream cannot grow without limit; ~ lets Redis trim cheaply. */
export const EVENT_STREAM_MAX_LEN = 10_000;

export interface StoredEvent extends LaneEvent {
  /** Stream id, usable as SSE `id:` and as the resume point. */
  id: string;
}

/** One read of the stream: the events that decoded, and the id of the last entry read (decoded or not), to read on from. */
export interface EventPage {
  events: StoredEvent[];
  /** Undefined when the read found no entry. */
  lastId: string | undefined;
}

type StreamEntries = Array<[string, string[]]>;
const pageOf = (entries: StreamEntries): EventPage => ({ events: decodeEntries(entries), lastId: entries.at(-1)?.[0] });

/** Card and sandbox events in a Redis stream, for `/v1/events` and for operators. */
export class EventLog {
  constructor(private readonly redis: Redis) {}

  /** Adds the XADD to a pipeline, so events commit with the state they describe. */
  appendTo(pipeline: ReturnType<Redis['multi']>, event: LaneEvent): void {
    pipeline.xadd(keys.events(), 'MAXLEN', '~', EVENT_STREAM_MAX_LEN, '*', 'e', JSON.stringify(event));
  }

  async append(event: LaneEvent): Promise<void> {
    await this.redis.xadd(keys.events(), 'MAXLEN', '~', EVENT_STREAM_MAX_LEN, '*', 'e', JSON.stringify(event));
  }

  /** Events after `afterId` ('$' for only new ones), waiting up to `blockMs` for the first. Needs its own connection when blocking. */
  async read(afterId: string, blockMs: number, count = 100): Promise<StoredEvent[]> {
    return (await this.readPage(afterId, blockMs, count)).events;
  }

  /** As `read`, with the last entry's id even when that entry did not decode, so a reader never re-reads it. */
  async readPage(afterId: string, blockMs: number, count = 100): Promise<EventPage> {
    const reply = (await this.redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.events(), afterId)) as Array<[string, StreamEntries]> | null;
    return pageOf(reply?.[0]?.[1] ?? []);
  }

  /** Up to `count` entries after `afterId` (exclusive) up to `toId` (inclusive), oldest first. Never blocks. */
  async range(afterId: string, toId: string, count: number): Promise<EventPage> {
    return pageOf((await this.redis.xrange(keys.events(), `(${afterId}`, toId, 'COUNT', count)) as StreamEntries);
  }

  /** The id of the newest entry, or `0-0` when the stream is empty: reading after it yields only new events. */
  async tailId(): Promise<string> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', '-', 'COUNT', 1)) as StreamEntries;
    return entries[0]?.[0] ?? '0-0';
  }

  /** The latest `count` events at or after `sinceMs` (stream ids are millisecond timestamps), oldest first. */
  async since(sinceMs: number, count: number): Promise<StoredEvent[]> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', `${Math.max(0, Math.floor(sinceMs))}-0`, 'COUNT', count)) as Array<[string, string[]]>;
    return decodeEntries(entries).reverse();
  }

  /** The latest `count` events after stream id `afterId` (exclusive), oldest first. */
  async newerThan(afterId: string, count: number): Promise<StoredEvent[]> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', `(${afterId}`, 'COUNT', count)) as Array<[string, string[]]>;
    return decodeEntries(entries).reverse();
  }

  async recent(count: number): Promise<StoredEvent[]> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', '-', 'COUNT', count)) as Array<[string, string[]]>;
    return decodeEntries(entries).reverse();
  }
}

function decodeEntries(entries: StreamEntries): StoredEvent[] {
  const out: StoredEvent[] = [];
  for (const [id, fields] of entries) {
    const raw = fields[fields.indexOf('e') + 1];
    if (raw === undefined) continue;
    const parsed = LaneEventSchema.safeParse(JSON.parse(raw));
    if (parsed.success) out.push({ ...parsed.data, id });
  }
  return out;
}
