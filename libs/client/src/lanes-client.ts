import { setTimeout as sleep } from 'node:timers/promises';
import {
  ErrorBodySchema,
  EventGapSchema,
  LaneEventSchema,
  type BulkEnqueueResponse,
  type CardInput,
  type CardListQueryInput,
  type CardPage,
  type CardRecord,
  type CardSummary,
  type EnqueueResponse,
  type EventGap,
  type LaneEvent,
  type LaneStatus,
} from '@lanes/contracts';
import { LanesApiError, LanesUnreachableError } from './client-errors.js';
import { SseFrameParser, type SseFrame } from './sse-frames.js';

/** A request that has had no answer for this long is given up: the API answers in milliseconds, so it is down or cut off. */
export const REQUEST_TIMEOUT_MS = 30_000;
/** Pause before re-opening a dropped event stream: long enough not to spin on a restarting API, short enough to keep up. */
export const EVENTS_RECONNECT_DELAY_MS = 500;

export interface LanesClientOptions {
  /** The API's base URL, e.g. http://127.0.0.1:3000. */
  url: string;
  /** A bearer token from LANES_API_TOKENS, when the API has any. */
  token?: string;
  timeoutMs?: number;
}

export type EnqueueResult = EnqueueResponse & { created: boolean };
export type BulkEnqueueResult = BulkEnqueueResponse['cards'];
/** An event as the stream carries it: its stream id is the resume point. */
export type StreamedEvent = LaneEvent & { id: string };

export interface EventsOptions {
  /** Only this lane's events (filtered by the API). */
  lane?: string;
  /** Only this card's events (filtered here: the API filters by lane only). */
  cardId?: string;
  /** Resume after this event id; default: events from now on. */
  since?: string;
  /** Ends the iteration. Breaking out of the loop does too. */
  signal?: AbortSignal;
  /** Between reconnects; a refusal with Retry-After (429 RATE_LIMITED) waits that long at least. */
  reconnectDelayMs?: number;
  /** Told each time the stream is open, with the id it resumes after (none on a first open from now). */
  onOpen?: (resumedAfter: string | undefined) => void;
  /** Told each time the stream dropped and is about to be re-opened, with why. */
  onReconnect?: (reason: unknown) => void;
  /**
   * Told when events after `gap.after` may have been trimmed before the stream could replay them (a
   * resume after the stream moved on by about 10,000 events); the iteration goes on from `gap.oldest`.
   * A board that needs every event re-reads its cards.
   */
  onGap?: (gap: EventGap) => void;
}

/** A batch of a card's output lines (stderr lines marked `[stderr] `): its stream id is the resume point. */
export interface OutputChunk {
  id: string;
  lines: string[];
}

export interface OutputOptions {
  /** Resume after this output id; default: from the oldest line the API still holds. */
  after?: string;
  /**
   * Told when lines after `gap.after` were trimmed before the stream could send them (a card keeps
   * its last 1 MiB of output: a reader that far behind a flood loses what lay between); the
   * iteration goes on from `gap.oldest`.
   */
  onGap?: (gap: EventGap) => void;
  /** Ends the iteration. Breaking out of the loop does too. */
  signal?: AbortSignal;
  reconnectDelayMs?: number;
  /** Told each time the stream is open, with the id it resumes after (none on a first open from the start). */
  onOpen?: (resumedAfter: string | undefined) => void;
  /** Told each time the stream dropped and is about to be re-opened, with why. */
  onReconnect?: (reason: unknown) => void;
}

/** A typed client of the lanes API: cards, lanes and the event stream. */
export class LanesClient {
  constructor(private readonly options: LanesClientOptions) {}

  /** Enqueues one card; `created` is false when a card with this id already exists (an idempotent re-post). */
  async enqueue(card: CardInput): Promise<EnqueueResult> {
    const { status, body } = await this.call<EnqueueResponse>('POST', '/v1/cards', card);
    return { ...body, created: status === 202 };
  }

  /** Enqueues many cards at once: all are validated first, so either all are taken or none. */
  async enqueueMany(cards: readonly CardInput[]): Promise<BulkEnqueueResult> {
    return (await this.call<BulkEnqueueResponse>('POST', '/v1/cards', { cards })).body.cards;
  }

  async get(id: string): Promise<CardRecord> {
    return (await this.call<CardRecord>('GET', `/v1/cards/${encodeURIComponent(id)}`)).body;
  }

  async cancel(id: string): Promise<EnqueueResponse> {
    return (await this.call<EnqueueResponse>('POST', `/v1/cards/${encodeURIComponent(id)}/cancel`)).body;
  }

  async unblock(id: string, note?: string): Promise<EnqueueResponse> {
    return (await this.call<EnqueueResponse>('POST', `/v1/cards/${encodeURIComponent(id)}/unblock`, note !== undefined ? { note } : {})).body;
  }

  /**
   * Queues a failed or cancelled card again: its history kept, `reason` recorded in it, attempts
   * from 0. A card in any other state throws LanesApiError 409 `CARD_STATE`; one whose run is still
   * ending it, 409 `CARD_BUSY` (ask again shortly).
   */
  async retry(id: string, reason?: string): Promise<EnqueueResponse> {
    return (await this.call<EnqueueResponse>('POST', `/v1/cards/${encodeURIComponent(id)}/retry`, reason !== undefined ? { reason } : {})).body;
  }

  /** One page of cards, newest update first; pass its `nextCursor` as `cursor` for the next. */
  async list(query: CardListQueryInput = {}): Promise<CardPage> {
    const params = new URLSearchParams();
    for (const [key, value] of Object.entries(query)) if (value !== undefined) params.set(key, String(value));
    const qs = params.toString();
    return (await this.call<CardPage>('GET', `/v1/cards${qs ? `?${qs}` : ''}`)).body;
  }

  /**
   * Every page of a listing, one request each, until the last (or until the loop breaks). Each card
   * comes once, in one listing's snapshot (the first page's `snapshotAt`): see README, `GET /v1/cards`.
   */
  async *pages(query: Omit<CardListQueryInput, 'cursor'> = {}): AsyncGenerator<CardPage, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.list({ ...query, ...(cursor !== undefined ? { cursor } : {}) });
      yield page;
      cursor = page.nextCursor;
    } while (cursor !== undefined);
  }

  /** The cards of every page of a listing, one by one. */
  async *cards(query: Omit<CardListQueryInput, 'cursor'> = {}): AsyncGenerator<CardSummary, void, undefined> {
    for await (const page of this.pages(query)) yield* page.cards;
  }

  async lanes(): Promise<LaneStatus[]> {
    return (await this.call<{ lanes: LaneStatus[] }>('GET', '/v1/lanes')).body.lanes;
  }

  /**
   * Follows the event stream until `signal` aborts or the loop breaks. A dropped connection or a
   * restarted API is re-opened with `Last-Event-ID`, so no event is lost or repeated across it.
   * An error the API will repeat (401, 400) ends the iteration with a LanesApiError.
   */
  async *events(options: EventsOptions = {}): AsyncGenerator<StreamedEvent, void, undefined> {
    const query = options.lane ? `?lane=${encodeURIComponent(options.lane)}` : '';
    for await (const frame of this.frames(`/v1/events${query}`, options.since, 'the event stream ended', options)) {
      if (frame.event === 'gap') {
        this.tellGap(frame, options.onGap);
        continue;
      }
      // An id-only frame moves the resume point (the API pins "from now" with one).
      if (frame.data === undefined || !frame.id) continue;
      const parsed = LaneEventSchema.safeParse(JSON.parse(frame.data));
      if (!parsed.success) continue; // an event type newer than this client: skip, keep the stream
      if (options.cardId && parsed.data.cardId !== options.cardId) continue;
      yield { ...parsed.data, id: frame.id };
    }
  }

  /**
   * A card's output as it is printed (`GET /v1/cards/:id/output`), until the card ends (the iteration
   * returns), `signal` aborts or the loop breaks. A dropped connection is re-opened with
   * `Last-Event-ID`, so no line is lost or repeated across it. An unknown or out-of-scope card ends
   * the iteration with a LanesApiError (404).
   */
  async *output(id: string, options: OutputOptions = {}): AsyncGenerator<OutputChunk, void, undefined> {
    for await (const frame of this.frames(`/v1/cards/${encodeURIComponent(id)}/output`, options.after, 'the output stream ended', options)) {
      if (frame.event === 'end') return;
      if (frame.event === 'gap') this.tellGap(frame, options.onGap);
      if (frame.event !== 'output' || frame.data === undefined || !frame.id) continue;
      const data = JSON.parse(frame.data) as { lines?: unknown };
      if (Array.isArray(data.lines)) yield { id: frame.id, lines: data.lines.map(String) };
    }
  }

  /** An `event: gap` frame to `onGap`; one that does not parse is left out, as an unknown event is. */
  private tellGap(frame: SseFrame, onGap: ((gap: EventGap) => void) | undefined): void {
    const gap = frame.data === undefined ? undefined : EventGapSchema.safeParse(JSON.parse(frame.data));
    if (gap?.success) onGap?.(gap.data);
  }

  /**
   * The frames of an SSE endpoint, re-opened after a drop with `Last-Event-ID` (the last id any frame
   * carried), until `signal` aborts or the consumer stops. An error the API will repeat ends it.
   */
  private async *frames(path: string, after: string | undefined, endedMessage: string, options: OutputOptions): AsyncGenerator<SseFrame, void, undefined> {
    let lastId = after;
    while (!options.signal?.aborted) {
      let waitMs = options.reconnectDelayMs ?? EVENTS_RECONNECT_DELAY_MS;
      try {
        const res = await this.send('GET', path, undefined, { accept: 'text/event-stream', ...(lastId ? { 'last-event-id': lastId } : {}) }, options.signal);
        if (!res.ok) throw await toApiError(res);
        options.onOpen?.(lastId);
        const reader = res.body!.getReader();
        const parser = new SseFrameParser();
        const decoder = new TextDecoder();
        try {
          for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
            for (const frame of parser.push(decoder.decode(chunk.value, { stream: true }))) {
              if (frame.id) lastId = frame.id;
              yield frame;
            }
          }
        } finally {
          await reader.cancel().catch(() => undefined);
        }
        options.onReconnect?.(new Error(endedMessage));
      } catch (err) {
        if (options.signal?.aborted) return;
        if (err instanceof LanesApiError && err.retry === 'permanent') throw err;
        // A token past its rate is told when to ask again: sooner only spends what it is short of.
        if (err instanceof LanesApiError && err.retryAfterMs !== undefined) waitMs = Math.max(waitMs, err.retryAfterMs);
        options.onReconnect?.(err);
      }
      try {
        await sleep(waitMs, undefined, options.signal ? { signal: options.signal } : {});
      } catch {
        return; // aborted while waiting
      }
    }
  }

  private async call<T>(method: string, path: string, body?: unknown): Promise<{ status: number; body: T }> {
    const res = await this.send(method, path, body, {}, AbortSignal.timeout(this.options.timeoutMs ?? REQUEST_TIMEOUT_MS));
    if (!res.ok) throw await toApiError(res);
    return { status: res.status, body: (await res.json()) as T };
  }

  private async send(method: string, path: string, body: unknown, headers: Record<string, string>, signal: AbortSignal | undefined): Promise<Response> {
    const url = `${this.options.url.replace(/\/$/, '')}${path}`;
    try {
      return await fetch(url, {
        method,
        headers: {
          // The API takes mutations only as JSON (415 otherwise), a bodyless one (cancel) included.
          ...(body !== undefined || method !== 'GET' ? { 'content-type': 'application/json' } : {}),
          ...(this.options.token ? { authorization: `Bearer ${this.options.token}` } : {}),
          ...headers,
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        ...(signal ? { signal } : {}),
      });
    } catch (err) {
      throw new LanesUnreachableError(url, err);
    }
  }
}

async function toApiError(res: Response): Promise<LanesApiError> {
  const text = await res.text().catch(() => '');
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const parsed = ErrorBodySchema.safeParse(json);
  if (!parsed.success) return new LanesApiError(res.status, `HTTP_${res.status}`, text.slice(0, 200) || res.statusText);
  const { code, message, issues } = parsed.data.error;
  const retryAfterS = Number(res.headers.get('retry-after') ?? Number.NaN);
  return new LanesApiError(res.status, code, message, issues, Number.isFinite(retryAfterS) && retryAfterS >= 0 ? retryAfterS * 1_000 : undefined);
}
