import type { Redis, Result } from 'ioredis';
import { LaneEventSchema, compareStreamIds, defaults, type LaneEvent } from '@lanes/contracts';
import { APPEND_EVENT_LUA } from './lane-event-streams.js';
import { keys } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesAppendEvent(...args: Array<string | number>): Result<string, Context>;
  }
}

/** KEYS: 1 the shared stream, 2 the lane's, 3 the lanes-since mark. ARGV: 1 max length, 2 the event (JSON). */
const SCRIPTS = {
  lanesAppendEvent: { numberOfKeys: 3, lua: `${APPEND_EVENT_LUA}\nreturn appendEvent(KEYS[1], KEYS[2], KEYS[3], ARGV[1], ARGV[2])` },
};

/** Bounded so the stream cannot grow without limit; ~ lets Redis trim cheaply. */
export const EVENT_STREAM_MAX_LEN = defaults.EVENT_STREAM_MAX_LEN;

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

/** The newest entries of a range: `full` when the count was reached, so older ones in the range may be left unread. */
export interface LatestPage extends EventPage {
  full: boolean;
}

/** What the stream still holds: its oldest entry, and whether it has ever trimmed one. */
export interface ReplayWindow {
  /** Undefined when the stream holds no entry. */
  firstId: string | undefined;
  /** Entries were trimmed (MAXLEN) at some time; unknown (a Redis before 7, no `entries-added`) counts as trimmed. */
  trimmed: boolean;
}

/** A page read together with the window it was read from, in one transaction. */
export interface WindowedPage extends EventPage {
  window: ReplayWindow;
}

/** A page of some lanes' own streams, with each lane's window, and the id from which those streams hold every event (undefined: none yet). */
export interface LanePage extends EventPage {
  windows: ReadonlyMap<string, ReplayWindow>;
  since: string | undefined;
}

type StreamEntries = Array<[string, string[]]>;
const pageOf = (entries: StreamEntries): EventPage => ({ events: decodeEntries(entries), lastId: entries.at(-1)?.[0] });

/** Card and sandbox events in a Redis stream, for `/v1/events` and for operators. */
export class EventLog {
  constructor(private readonly redis: Redis) {
    // Here, not at the first append: a pipeline has only the commands defined before it was made.
    defineScriptsOnce(redis, SCRIPTS);
  }

  /** Adds the append to a pipeline (made after this log), so events commit with the state they describe. */
  appendTo(pipeline: ReturnType<Redis['multi']>, event: LaneEvent): void {
    pipeline.lanesAppendEvent(...appendArgs(event));
  }

  /** Appends to the shared stream and the lane's (lane-event-streams.ts). */
  async append(event: LaneEvent): Promise<void> {
    await this.redis.lanesAppendEvent(...appendArgs(event));
  }

  /** Events after `afterId` ('$' for only new ones), waiting up to `blockMs` for the first. Needs its own connection when blocking. */
  async read(afterId: string, blockMs: number, count = 100): Promise<StoredEvent[]> {
    return (await this.readPage(afterId, blockMs, count)).events;
  }

  /**
   * As `read`, with the last entry's id even when that entry did not decode, so a reader never
   * re-reads it, and the stream's window read just after it (EXISTS and XINFO STREAM pipelined
   * behind the XREAD, no round trip more). A trim between the two can only make the window look
   * further on than it was at the read: a reader may be told of a gap that was not there, never miss one.
   */
  async readPage(afterId: string, blockMs: number, count = 100): Promise<WindowedPage> {
    const [read, exists, info] =
      (await this.redis
        .pipeline()
        .xread('COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.events(), afterId)
        .exists(keys.events())
        .call('XINFO', 'STREAM', keys.events())
        .exec()) ?? [];
    if (read?.[0]) throw read[0];
    const reply = read?.[1] as Array<[string, StreamEntries]> | null;
    return { ...pageOf(reply?.[0]?.[1] ?? []), window: windowFrom(exists, info) };
  }

  /**
   * Up to `count` entries after `afterId` (exclusive) up to `toId` (inclusive), oldest first, with
   * what the stream held at that moment (XINFO STREAM in the same MULTI), so a reader can tell
   * whether entries after `afterId` were trimmed before it read them. Never blocks.
   */
  async range(afterId: string, toId: string, count: number): Promise<WindowedPage> {
    const [exists, info, range] =
      (await this.redis.multi().exists(keys.events()).call('XINFO', 'STREAM', keys.events()).xrange(keys.events(), `(${afterId}`, toId, 'COUNT', count).exec()) ?? [];
    if (range?.[0]) throw range[0];
    return { ...pageOf(range?.[1] as StreamEntries), window: windowFrom(exists, info) };
  }

  /**
   * As `range`, from the lanes' own streams merged by id (lane-event-streams.ts): up to `count`
   * entries of theirs after `afterId` up to `toId`, with each lane's window and the mark from which
   * the lane streams hold every event, read in one MULTI.
   */
  async laneRange(lanes: readonly string[], afterId: string, toId: string, count: number): Promise<LanePage> {
    const multi = this.redis.multi().get(keys.laneEventsSince());
    for (const lane of lanes) {
      const key = keys.laneEvents(lane);
      multi.exists(key).call('XINFO', 'STREAM', key).xrange(key, `(${afterId}`, toId, 'COUNT', count);
    }
    const replies = (await multi.exec()) ?? [];
    const windows = new Map<string, ReplayWindow>();
    const entries: StreamEntries = [];
    lanes.forEach((lane, i) => {
      const [exists, info, range] = replies.slice(1 + 3 * i, 4 + 3 * i);
      if (range?.[0]) throw range[0];
      windows.set(lane, windowFrom(exists, info));
      entries.push(...((range?.[1] ?? []) as StreamEntries));
    });
    // The `count` oldest of all: whatever a lane's page left out is newer than all of its page.
    entries.sort(([a], [b]) => compareStreamIds(a, b));
    const since = replies[0]?.[1];
    return { ...pageOf(entries.slice(0, count)), windows, since: typeof since === 'string' ? since : undefined };
  }

  /** The id of the newest entry, or `0-0` when the stream is empty: reading after it yields only new events. */
  async tailId(): Promise<string> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', '-', 'COUNT', 1)) as StreamEntries;
    return entries[0]?.[0] ?? '0-0';
  }

  /**
   * The latest `count` entries at or after `sinceMs` (stream ids are millisecond timestamps), oldest
   * first, as the events among them of `types` (every type when none is given).
   */
  async since(sinceMs: number, count: number, types?: ReadonlySet<string>): Promise<StoredEvent[]> {
    return (await this.sincePage(sinceMs, count, types)).events;
  }

  /** As `since`, with the newest entry's id (kept or not) and whether the count was reached. */
  async sincePage(sinceMs: number, count: number, types?: ReadonlySet<string>): Promise<LatestPage> {
    return this.latest(`${Math.max(0, Math.floor(sinceMs))}-0`, count, types);
  }

  /** As `since`, after stream id `afterId` (exclusive). */
  async newerThan(afterId: string, count: number, types?: ReadonlySet<string>): Promise<LatestPage> {
    return this.latest(`(${afterId}`, count, types);
  }

  private async latest(from: string, count: number, types: ReadonlySet<string> | undefined): Promise<LatestPage> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', from, 'COUNT', count)) as StreamEntries;
    return { events: decodeEntries(entries, types).reverse(), lastId: entries[0]?.[0], full: entries.length >= count };
  }

  async recent(count: number): Promise<StoredEvent[]> {
    const entries = (await this.redis.xrevrange(keys.events(), '+', '-', 'COUNT', count)) as Array<[string, string[]]>;
    return decodeEntries(entries).reverse();
  }
}

type Reply = [Error | null, unknown] | undefined;

/** EXISTS and XINFO STREAM's replies as a window: a missing stream (XINFO fails on it) holds nothing and trimmed nothing. */
function windowFrom(exists: Reply, info: Reply): ReplayWindow {
  if (exists?.[1] === 0) return { firstId: undefined, trimmed: false };
  if (info?.[0]) throw info[0];
  return windowOf(info?.[1] as unknown[]);
}

/** XINFO STREAM's flat reply, read by field name: `length`, `entries-added` (Redis 7+) and `first-entry`. */
function windowOf(info: unknown[]): ReplayWindow {
  const field = (name: string) => {
    const at = info.indexOf(name);
    return at < 0 ? undefined : info[at + 1];
  };
  const added = field('entries-added');
  const first = field('first-entry') as [string, string[]] | null | undefined;
  return { firstId: first?.[0] ?? undefined, trimmed: typeof added !== 'number' || added > Number(field('length')) };
}

/** Entries of a type outside `types` are skipped before the schema: a burst's card.queued events cost a reader that never reads them nothing but a JSON parse. */
function decodeEntries(entries: StreamEntries, types?: ReadonlySet<string>): StoredEvent[] {
  const out: StoredEvent[] = [];
  for (const [id, fields] of entries) {
    const raw = fields[fields.indexOf('e') + 1];
    if (raw === undefined) continue;
    const json: unknown = JSON.parse(raw);
    if (types && !types.has((json as { type?: unknown } | null)?.type as string)) continue;
    const parsed = LaneEventSchema.safeParse(json);
    if (parsed.success) out.push({ ...parsed.data, id });
  }
  return out;
}

/** `lanesAppendEvent`'s arguments for one event. */
function appendArgs(event: LaneEvent): Array<string | number> {
  return [keys.events(), keys.laneEvents(event.lane), keys.laneEventsSince(), EVENT_STREAM_MAX_LEN, JSON.stringify(event)];
}
