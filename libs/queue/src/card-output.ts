import type { Redis } from 'ioredis';
import { CardStateSchema, agentLimits, type CardState } from '@lanes/contracts';
import { keys } from './names.js';

/**
 * Where an entry lies in the bytes the card has printed to its stream (`t`, job-log-append.ts):
 * `before` them when it was added, `through` them with it. Consecutive entries meet
 * (`next.before === prev.through`) unless what lay between was trimmed.
 */
export interface OutputBytes {
  before: number;
  through: number;
}

/** One entry of a card's output stream: a batch of lines, or the end of a run (its terminal state). `bytes` is absent for an entry written without `t`. */
export type OutputEntry = ({ id: string; kind: 'lines'; lines: string[] } | { id: string; kind: 'end'; state: CardState }) & { bytes?: OutputBytes };

/** A point in a card's output stream: an entry's id, and the bytes printed through it when known (not when that entry is no longer held). */
export interface OutputPosition {
  id: string;
  through: number | undefined;
}

/** One read of a card's output: the entries that decoded, and the id of the last entry read, to read on from. */
export interface OutputPage {
  entries: OutputEntry[];
  /** Undefined when the read found no entry. */
  lastId: string | undefined;
}

type StreamEntries = Array<[string, string[]]>;

function field(fields: string[], name: string): string | undefined {
  for (let i = 0; i < fields.length; i += 2) if (fields[i] === name) return fields[i + 1];
  return undefined;
}

/** The entry's `t` and its lines' bytes as its place in the output; undefined without a `t`. */
function bytesOf(fields: string[], text: string | undefined): OutputBytes | undefined {
  const through = Number(field(fields, 't'));
  if (!Number.isSafeInteger(through)) return undefined;
  return { before: through - (text === undefined ? 0 : Buffer.byteLength(text)), through };
}

function decode(entries: StreamEntries): OutputPage {
  const out: OutputEntry[] = [];
  for (const [id, fields] of entries) {
    const text = field(fields, 'l');
    const bytes = bytesOf(fields, text);
    const place = bytes === undefined ? {} : { bytes };
    if (text !== undefined) {
      out.push({ id, kind: 'lines', lines: text.split('\n'), ...place });
      continue;
    }
    const state = CardStateSchema.safeParse(field(fields, 'end'));
    if (state.success) out.push({ id, kind: 'end', state: state.data, ...place });
  }
  return { entries: out, lastId: entries.at(-1)?.[0] };
}

/**
 * The last `maxBytes` of `text` (UTF-8), cut at a line start: the first line kept is whole unless
 * one line alone is longer than the cap, in which case it is cut at a character boundary.
 */
export function trimOutputTail(text: string, maxBytes: number): string {
  const buf = Buffer.from(text, 'utf8');
  if (buf.length <= maxBytes) return text;
  let start = buf.length - maxBytes;
  if (buf[start - 1] !== 0x0a) {
    const nl = buf.indexOf(0x0a, start);
    if (nl !== -1 && nl + 1 < buf.length) start = nl + 1;
    else while (start < buf.length && ((buf[start] ?? 0) & 0xc0) === 0x80) start++;
  }
  return buf.subarray(start).toString('utf8');
}

function positionIn(entries: StreamEntries): OutputPosition | undefined {
  const [id, fields] = entries[0] ?? [];
  if (id === undefined || fields === undefined) return undefined;
  return { id, through: bytesOf(fields, field(fields, 'l'))?.through };
}

/** Entries read per page when the tail is gathered newest first. */
const TAIL_PAGE_ENTRIES = 32;

/**
 * A card's output lines in Redis (written with its job log, job-log-append.ts): ranges for SSE
 * catch-up, a multi-card blocking read for the API's one live reader, and the tail kept with the card.
 */
export class CardOutput {
  constructor(private readonly redis: Redis) {}

  /** Up to `count` entries after `afterId` (exclusive) up to `toId` (inclusive), oldest first. Never blocks. */
  async range(cardId: string, afterId: string, count: number, toId = '+'): Promise<OutputPage> {
    return decode((await this.redis.xrange(keys.cardOutput(cardId), `(${afterId}`, toId, 'COUNT', count)) as StreamEntries);
  }

  /** The id of the newest entry, or `0-0` when there is none. */
  async tailId(cardId: string): Promise<string> {
    return (await this.tailPosition(cardId)).id;
  }

  /** The newest entry's position, or `0-0` (nothing printed before it) when there is none. */
  async tailPosition(cardId: string): Promise<OutputPosition> {
    const entries = (await this.redis.xrevrange(keys.cardOutput(cardId), '+', '-', 'COUNT', 1)) as StreamEntries;
    return positionIn(entries) ?? { id: '0-0', through: 0 };
  }

  /** Entry `id`'s position: its bytes when it is still held; `0-0` is the start, with nothing before it. */
  async positionOf(cardId: string, id: string): Promise<OutputPosition> {
    if (id === '0-0') return { id, through: 0 };
    return positionIn((await this.redis.xrange(keys.cardOutput(cardId), id, id)) as StreamEntries) ?? { id, through: undefined };
  }

  /** New entries of any of these cards (card id → read after), waiting up to `blockMs`. Needs its own connection. */
  async readMany(after: ReadonlyMap<string, string>, blockMs: number, count: number): Promise<Map<string, OutputPage>> {
    const ids = [...after.keys()];
    const reply = (await this.redis.xread(
      'COUNT',
      count,
      'BLOCK',
      blockMs,
      'STREAMS',
      ...ids.map((id) => keys.cardOutput(id)),
      ...ids.map((id) => after.get(id) ?? '0-0'),
    )) as Array<[string, StreamEntries]> | null;
    const pages = new Map<string, OutputPage>();
    for (const [key, entries] of reply ?? []) {
      const id = ids.find((c) => keys.cardOutput(c) === key);
      if (id !== undefined) pages.set(id, decode(entries));
    }
    return pages;
  }

  /** The last `maxBytes` of the card's output lines, or undefined when it has printed none. */
  async tail(cardId: string, maxBytes: number = agentLimits.CARD_OUTPUT_TAIL_BYTES): Promise<string | undefined> {
    const texts: string[] = [];
    let bytes = 0;
    let before = '+';
    while (bytes < maxBytes) {
      const entries = (await this.redis.xrevrange(keys.cardOutput(cardId), before, '-', 'COUNT', TAIL_PAGE_ENTRIES)) as StreamEntries;
      for (const [, fields] of entries) {
        const text = field(fields, 'l');
        if (text === undefined) continue;
        texts.push(text);
        bytes += Buffer.byteLength(text) + 1;
        if (bytes >= maxBytes) break;
      }
      const oldest = entries.at(-1)?.[0];
      if (entries.length < TAIL_PAGE_ENTRIES || oldest === undefined) break;
      before = `(${oldest}`;
    }
    if (texts.length === 0) return undefined;
    return trimOutputTail(texts.reverse().join('\n'), maxBytes);
  }
}
