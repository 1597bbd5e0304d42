import type { Redis } from 'ioredis';
import { LaneEventSchema, type LaneEvent } from '@lanes/contracts';
import { keys } from './names.js';

/** Bounded so the stream cannot grow without limit; ~ lets Redis trim cheaply. */
export const EVENT_STREAM_MAX_LEN = 10_000;

export interface StoredEvent extends LaneEvent {
  /** Stream id, usable as SSE `id:` and as the resume point. */
  id: string;
}

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
    const reply = (await this.redis.xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.events(), afterId)) as Array<[string, Array<[string, string[]]>]> | null;
    return reply ? decodeEntries(reply[0]?.[1] ?? []) : [];
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

function decodeEntries(entries: Array<[string, string[]]>): StoredEvent[] {
  const out: StoredEvent[] = [];
  for (const [id, fields] of entries) {
    const raw = fields[fields.indexOf('e') + 1];
    if (raw === undefined) continue;
    const parsed = LaneEventSchema.safeParse(JSON.parse(raw));
    if (parsed.success) out.push({ ...parsed.data, id });
  }
  return out;
}
