import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Span } from '@lanes/tracing';
import { LaneEventSchema, type CallbackAllowRule, type LaneEvent } from '@lanes/contracts';
import { ackCallbacks, isGroupExistsError, keys, type CardStore } from '@lanes/queue';
import {
  DEFAULT_CALLBACK_CONCURRENCY,
  DEFAULT_CALLBACK_RETRY,
  evaluateCallback,
  isNotified,
  selectDeliveries,
  type CallbackConcurrencyConfig,
  type CallbackRetryConfig,
  type DeliverySlot,
} from './callback-policy.js';
import { postTo, resolveCallbackTarget, systemLookup, type CallbackLookup } from './callback-target.js';
import { carryOldCallbacks } from './callback-upgrade.js';
import { SIGNATURE_HEADER, signatureHeader } from './callback-signature.js';
import { inCallbackSpan, noteCallbackAttempt, traceHeaders, traceLogFieldsOf } from './callback-trace.js';

/**
 * Consumer group on the callback stream (`keys.callbacks()`: the card script puts there only the
 * events a board hears of, of cards with a callbackUrl): each is delivered by one supervisor, and
 * re-delivered if it dies mid-way.
 */
export const CALLBACK_GROUP = 'lanes-callbacks';
/** A board gets this long to answer one delivery. */
export const CALLBACK_TIMEOUT_MS = 5_000;
/** An entry another supervisor held this long without acknowledging is taken over. */
export const CALLBACK_CLAIM_IDLE_MS = 60_000;
/**
 * Entries read and not yet finished, at most. Each is its id, card id and URL (a few hundred
 * bytes), so this is a few MB; past it the dispatcher reads no more until some finish.
 */
export const CALLBACK_MAX_HELD = 10_000;
/** Header naming the delivery: the callback stream entry's id, the same on every try of one event. */
export const DELIVERY_HEADER = 'x-lanes-delivery';
const READ_BLOCK_MS = 2_000;
const READ_COUNT = 100;
/** After a Redis error the loop and the acknowledger wait this long before trying again. */
const RETRY_AFTER_ERROR_MS = 500;
/** XCLAIM takes this many ids at a time when it renews what this dispatcher holds. */
const RENEW_CHUNK = 1_000;

export interface CallbackDeps {
  /** A connection of its own: the dispatcher blocks on it, and duplicates it once for acknowledgements. */
  redis: Redis;
  store: CardStore;
  log: Logger;
  consumer: string;
  /** LANES_CALLBACK_SECRET: when set, each body is signed (`x-lanes-signature: t=<unix s>,v1=<hex hmac>`). */
  secret?: string;
  /** LANES_CALLBACK_SECRET_PREVIOUS: during a rotation, a second `v1=` signed with it follows the current one. */
  previousSecret?: string;
  /** Lanes with a callback secret of their own (`laneCallbackSecrets`): their cards' bodies are signed with it alone, current first. */
  laneSecrets?: ReadonlyMap<string, readonly string[]>;
  /** LANES_CALLBACK_ALLOW: inward addresses a delivery may still reach. */
  allow?: readonly CallbackAllowRule[];
  /** DNS for callback hosts; every address is checked before connecting. Default the system resolver. */
  lookup?: CallbackLookup;
  /** Wall clock, for the signature's timestamp. */
  now?: () => number;
  retry?: CallbackRetryConfig;
  /** In flight per host and in total (DEFAULT_CALLBACK_CONCURRENCY). */
  concurrency?: CallbackConcurrencyConfig;
  /** Entries read and not finished, at most (CALLBACK_MAX_HELD). */
  maxHeld?: number;
  timeoutMs?: number;
  /** How long another consumer's entry must sit unacknowledged before it is taken over (CALLBACK_CLAIM_IDLE_MS). */
  claimIdleMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

/** An entry read from the stream that is to be delivered. */
interface Held extends DeliverySlot {
  event: LaneEvent;
  url: URL;
}

/** How a delivery ended: acknowledged (delivered, refused or given up), or left pending to be delivered again. */
type Finish = 'ack' | 'keep';

/**
 * Tells boards about their cards: POSTs `{event, at, deliveryId, card}` to the card's callbackUrl,
 * at least once. Deliveries run concurrently within a bound per host and in total
 * (`selectDeliveries`), so a host that never answers holds only its own. Each entry is acknowledged
 * when its delivery ends, and the stream is trimmed only up to the oldest entry not acknowledged.
 */
export class CallbackDispatcher {
  private running = false;
  private loop: Promise<void> | undefined;
  /** Acknowledgements, trims and renewals: the reader's connection is blocked in XREADGROUP. */
  private writer: Redis | undefined;
  private readonly stopping = new AbortController();
  /** performance.now() at which pending entries are next looked for. */
  private nextClaimAt = 0;
  /** performance.now() at which the entries this dispatcher holds are next renewed. */
  private nextRenewAt = 0;
  /** Every entry read and not finished: waiting in `queued` or in `active`. */
  private readonly held = new Map<string, Held>();
  private readonly queued = new Map<string, Held[]>();
  private readonly active = new Map<string, Held>();
  private readonly inFlight = new Set<Promise<void>>();
  private toAck: string[] = [];
  private acking: Promise<void> | undefined;
  private ackAgain = false;
  /** Wakes the reader when it waits for room, or at stop. */
  private wake: (() => void) | undefined;

  constructor(private readonly deps: CallbackDeps) {}

  private get claimIdleMs(): number {
    return this.deps.claimIdleMs ?? CALLBACK_CLAIM_IDLE_MS;
  }

  async start(): Promise<void> {
    try {
      // From the stream's start: it holds only what this group is to deliver, and what the card
      // script put there before any dispatcher ever started is owed to its boards too.
      await this.deps.redis.xgroup('CREATE', keys.callbacks(), CALLBACK_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!isGroupExistsError(err)) throw err; // the group exists: another supervisor made it
    }
    // After the group exists, so what is carried over lies after its start and is read.
    const carried = await carryOldCallbacks(this.deps.redis, CALLBACK_GROUP);
    if (carried.found) {
      this.deps.log.info(
        { event: 'callback.upgrade', pending: carried.pending, unread: carried.unread },
        'callbacks of the old event-stream group carried over; the group is gone',
      );
    }
    this.writer = this.deps.redis.duplicate();
    this.writer.on('error', (err: Error) => this.deps.log.warn({ err: err.message }, 'callback connection error'));
    this.running = true;
    this.loop = this.run();
  }

  /** Stops reading, cuts short what is in flight (left pending, delivered again later), acknowledges what finished. */
  async stop(): Promise<void> {
    this.running = false;
    this.stopping.abort();
    this.deps.redis.disconnect();
    this.wake?.();
    await this.loop;
    await Promise.allSettled([...this.inFlight]);
    this.flushAcks();
    await this.acking;
    this.writer?.disconnect();
  }

  private async run(): Promise<void> {
    const maxHeld = this.deps.maxHeld ?? CALLBACK_MAX_HELD;
    while (this.running) {
      try {
        await this.renewHeld();
        const room = maxHeld - this.held.size;
        if (room <= 0) {
          await this.waitForRoom();
          continue;
        }
        await this.take(await this.next(Math.min(READ_COUNT, room)));
      } catch (err) {
        if (!this.running) return;
        this.deps.log.warn({ err }, 'callback dispatch failed; retrying');
        await this.pause(RETRY_AFTER_ERROR_MS);
      }
    }
  }

  /** Until a held entry finishes, or it is time to renew the held ones, or stop. */
  private waitForRoom(): Promise<void> {
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, Math.max(1, this.nextRenewAt - performance.now()));
      function done() {
        clearTimeout(timer);
        resolve();
      }
      this.wake = done;
    }).finally(() => {
      this.wake = undefined;
    });
  }

  /**
   * Entries this dispatcher holds are not idle, though waiting for their host may take long:
   * XCLAIM to itself resets their idle time, so no other supervisor takes them over (only a dead
   * one's entries reach claimIdleMs).
   */
  private async renewHeld(): Promise<void> {
    const now = performance.now();
    if (now < this.nextRenewAt) return;
    this.nextRenewAt = now + this.claimIdleMs / 3;
    const ids = [...this.held.keys()];
    for (let i = 0; i < ids.length; i += RENEW_CHUNK) {
      await this.writer!.xclaim(keys.callbacks(), CALLBACK_GROUP, this.deps.consumer, 0, ...ids.slice(i, i + RENEW_CHUNK), 'JUSTID');
    }
  }

  /**
   * Entries left pending by a dead supervisor first, then new ones. Pending entries can only be
   * taken once idle for claimIdleMs, so they are looked for at most every half of that, not on
   * every wake: a busy stream costs one blocking read per batch.
   */
  private async next(count: number): Promise<Array<[string, string[]]>> {
    const { redis, consumer } = this.deps;
    let entries: Array<[string, string[]]> = [];
    const now = performance.now();
    if (now >= this.nextClaimAt) {
      const claimed = (await redis.xautoclaim(keys.callbacks(), CALLBACK_GROUP, consumer, this.claimIdleMs, '0-0', 'COUNT', count)) as [string, Array<[string, string[]] | null>];
      entries = (claimed[1] ?? []).filter((e): e is [string, string[]] => e !== null && !this.held.has(e[0]));
      // A full page may have more behind it: look again at once.
      if ((claimed[1] ?? []).length < count) this.nextClaimAt = now + this.claimIdleMs / 2;
    }
    if (entries.length === 0) {
      const until = Math.min(this.nextClaimAt, this.nextRenewAt) - performance.now();
      const blockMs = Math.max(1, Math.min(READ_BLOCK_MS, Math.ceil(until)));
      const reply = (await redis.xreadgroup('GROUP', CALLBACK_GROUP, consumer, 'COUNT', count, 'BLOCK', blockMs, 'STREAMS', keys.callbacks(), '>')) as Array<
        [string, Array<[string, string[]]>]
      > | null;
      entries = reply?.[0]?.[1] ?? [];
    }
    return entries;
  }

  /**
   * Queues what is to be delivered, by the host of its card's callbackUrl (one read of the card
   * JSON per entry, in one pipeline); what is not (unreadable, not an event a board hears of, a
   * card without a callbackUrl, or gone) is acknowledged as it is, so it cannot block the stream.
   */
  private async take(entries: Array<[string, string[]]>): Promise<void> {
    if (entries.length === 0) return;
    const events = entries.map(([id, fields]) => {
      let event: LaneEvent | undefined;
      try {
        const parsed = LaneEventSchema.safeParse(JSON.parse(fields[fields.indexOf('e') + 1] ?? 'null'));
        if (parsed.success && isNotified(parsed.data.type) && parsed.data.cardId) event = parsed.data;
      } catch {
        event = undefined;
      }
      return { id, event };
    });
    const pipeline = this.writer!.pipeline();
    for (const { event } of events) if (event) pipeline.hget(keys.card(event.cardId!), 'card');
    const replies = (await pipeline.exec()) ?? [];
    let r = 0;
    for (const { id, event } of events) {
      if (!event) {
        this.toAck.push(id);
        continue;
      }
      const [err, raw] = replies[r++] ?? [null, null];
      if (err) throw err;
      const url = callbackUrlOf(raw);
      if (!url) {
        this.toAck.push(id);
        continue;
      }
      const held: Held = { id, host: url.origin, cardId: event.cardId!, lane: event.lane, event, url };
      this.held.set(id, held);
      const queue = this.queued.get(held.host);
      if (queue) queue.push(held);
      else this.queued.set(held.host, [held]);
    }
    this.flushAcks();
    this.pump();
  }

  /** Starts what the policy lets start now. */
  private pump(): void {
    if (!this.running) return;
    const start = new Set(selectDeliveries({ queued: this.queued, active: [...this.active.values()] }, this.deps.concurrency ?? DEFAULT_CALLBACK_CONCURRENCY));
    if (start.size === 0) return;
    for (const [host, queue] of this.queued) {
      const rest = queue.filter((h) => !start.has(h.id));
      if (rest.length === queue.length) continue;
      for (const h of queue) if (start.has(h.id)) this.begin(h);
      if (rest.length) this.queued.set(host, rest);
      else this.queued.delete(host);
    }
  }

  private begin(held: Held): void {
    this.active.set(held.id, held);
    const run: Promise<void> = this.deliver(held)
      .catch((err: unknown): Finish => {
        if (this.running) this.deps.log.warn({ err, cardId: held.cardId, deliveryId: held.id }, 'callback delivery failed; it stays pending');
        return 'keep';
      })
      .then((finish) => this.finish(held, finish))
      .finally(() => this.inFlight.delete(run));
    this.inFlight.add(run);
  }

  private finish(held: Held, finish: Finish): void {
    this.active.delete(held.id);
    this.held.delete(held.id);
    // Kept: left pending, unrenewed; after claimIdleMs it is claimed and delivered again.
    if (finish === 'ack') this.toAck.push(held.id);
    this.flushAcks();
    this.pump();
    this.wake?.();
  }

  /** One acknowledgement script at a time; what finishes meanwhile goes in the next. */
  private flushAcks(): void {
    if (this.acking) {
      this.ackAgain = true;
      return;
    }
    if (this.toAck.length === 0 || !this.writer) return;
    this.acking = (async () => {
      do {
        this.ackAgain = false;
        const ids = this.toAck;
        this.toAck = [];
        if (ids.length === 0) continue;
        try {
          await ackCallbacks(this.writer!, CALLBACK_GROUP, ids);
        } catch (err) {
          // Unacknowledged entries stay pending: delivered again after a takeover, never lost.
          if (!this.running) return;
          this.toAck.unshift(...ids);
          this.deps.log.warn({ err }, 'callback acknowledgement failed; retrying');
          await this.pause(RETRY_AFTER_ERROR_MS);
          this.ackAgain = true;
        }
      } while (this.ackAgain);
    })().finally(() => {
      this.acking = undefined;
    });
  }

  /** A delivery, as one `card.callback` span while tracing is on (callback-trace.ts). */
  private deliver(held: Held): Promise<Finish> {
    return inCallbackSpan(this.writer!, held, (span) => this.deliverTraced(held, span));
  }

  private async deliverTraced(held: Held, span: Span | undefined): Promise<Finish> {
    const { event, url } = held;
    const card = await this.deps.store.get(held.cardId);
    if (!card?.callbackUrl) return 'ack';
    const body = JSON.stringify({ event: event.type, at: event.at, deliveryId: held.id, card });
    const headers: Record<string, string> = traceHeaders(
      {
        'content-type': 'application/json',
        'x-lanes-event': event.type,
        [DELIVERY_HEADER]: held.id,
        'user-agent': 'lanes-callback',
      },
      span,
    );
    const secrets = this.deps.laneSecrets?.get(card.lane) ?? [this.deps.secret, this.deps.previousSecret].filter((s): s is string => s !== undefined);
    const log = this.deps.log.child({ cardId: card.id, lane: card.lane, event: 'card.callback', deliveryId: held.id, ...traceLogFieldsOf(span) });
    for (let attempt = 1; ; attempt++) {
      if (!this.running) return 'keep';
      // Resolved on every attempt: a name may have moved inward since the last one.
      const target = await resolveCallbackTarget(url, this.deps.allow ?? [], this.deps.lookup ?? systemLookup);
      if (target.action === 'refuse') {
        this.deps.log.warn(
          { cardId: card.id, lane: card.lane, event: 'callback.refused', type: event.type, address: target.address, reason: target.reason },
          'callback refused: its target is inward',
        );
        return 'ack';
      }
      if (secrets.length) headers[SIGNATURE_HEADER] = signatureHeader(secrets, body, Math.floor((this.deps.now ?? Date.now)() / 1000));
      const result =
        target.action === 'unresolved' ? { error: target.reason } : await postTo(url, target, body, headers, this.deps.timeoutMs ?? CALLBACK_TIMEOUT_MS, this.stopping.signal);
      if (!this.running) return 'keep';
      const decision = evaluateCallback(result, attempt, this.deps.retry ?? DEFAULT_CALLBACK_RETRY);
      noteCallbackAttempt(span, attempt, result, decision);
      switch (decision.action) {
        case 'done':
          log.info({ type: event.type, reason: decision.reason }, 'callback delivered');
          return 'ack';
        case 'give-up':
          log.warn({ type: event.type, reason: decision.reason }, 'callback not delivered');
          return 'ack';
        case 'retry':
          log.info({ type: event.type, reason: decision.reason }, 'callback retry');
          await this.pause(decision.delayMs);
      }
    }
  }

  /** Waits `ms`, or less if the dispatcher stops meanwhile. */
  private pause(ms: number): Promise<void> {
    if (this.deps.sleep) return this.deps.sleep(ms);
    return new Promise<void>((resolve) => {
      const timer = setTimeout(done, ms);
      const signal = this.stopping.signal;
      function done() {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      }
      signal.addEventListener('abort', done);
    });
  }
}

/** The callbackUrl of a stored card JSON, parsed; undefined when there is none (or it is not a URL). */
function callbackUrlOf(raw: unknown): URL | undefined {
  if (typeof raw !== 'string') return undefined;
  try {
    const card = JSON.parse(raw) as { callbackUrl?: unknown };
    return typeof card.callbackUrl === 'string' ? new URL(card.callbackUrl) : undefined;
  } catch {
    return undefined;
  }
}
