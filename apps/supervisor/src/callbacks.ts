import { createHmac } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { LaneEventSchema, type CallbackAllowRule, type LaneEvent } from '@lanes/contracts';
import { keys, type CardStore } from '@lanes/queue';
import { DEFAULT_CALLBACK_RETRY, evaluateCallback, isNotified, type CallbackRetryConfig } from './callback-policy.js';
import { postTo, resolveCallbackTarget, systemLookup, type CallbackLookup } from './callback-target.js';
import { carryOldCallbacks } from './callback-upgrade.js';

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
const READ_BLOCK_MS = 2_000;

export interface CallbackDeps {
  /** A connection of its own: the dispatcher blocks on it. */
  redis: Redis;
  store: CardStore;
  log: Logger;
  consumer: string;
  /** LANES_CALLBACK_SECRET: when set, each body is signed (`x-lanes-signature: t=<unix s>,v1=<hex hmac>`). */
  secret?: string;
  /** LANES_CALLBACK_ALLOW: inward addresses a delivery may still reach. */
  allow?: readonly CallbackAllowRule[];
  /** DNS for callback hosts; every address is checked before connecting. Default the system resolver. */
  lookup?: CallbackLookup;
  /** Wall clock, for the signature's timestamp. */
  now?: () => number;
  retry?: CallbackRetryConfig;
  timeoutMs?: number;
  /** How long another consumer's entry must sit unacknowledged before it is taken over (CALLBACK_CLAIM_IDLE_MS). */
  claimIdleMs?: number;
  sleep?: (ms: number) => Promise<void>;
}

/**
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>">`: the timestamp is signed with the body,
 * so a receiver can refuse a captured delivery replayed later.
 */
export function signBody(secret: string, body: string, unixSeconds: number): string {
  return `t=${unixSeconds},v1=${createHmac('sha256', secret).update(`${unixSeconds}.${body}`).digest('hex')}`;
}

/** Tells boards about their cards: POSTs `{event, card}` to the card's callbackUrl, at least once. */
export class CallbackDispatcher {
  private running = false;
  private loop: Promise<void> | undefined;
  /** performance.now() at which pending entries are next looked for. */
  private nextClaimAt = 0;

  constructor(private readonly deps: CallbackDeps) {}

  async start(): Promise<void> {
    try {
      // From the stream's start: it holds only what this group is to deliver, and what the card
      // script put there before any dispatcher ever started is owed to its boards too.
      await this.deps.redis.xgroup('CREATE', keys.callbacks(), CALLBACK_GROUP, '0', 'MKSTREAM');
    } catch (err) {
      if (!String(err).includes('BUSYGROUP')) throw err; // the group exists: another supervisor made it
    }
    // After the group exists, so what is carried over lies after its start and is read.
    const carried = await carryOldCallbacks(this.deps.redis, CALLBACK_GROUP);
    if (carried.found) {
      this.deps.log.info(
        { event: 'callback.upgrade', pending: carried.pending, unread: carried.unread },
        'callbacks of the old event-stream group carried over; the group is gone',
      );
    }
    this.running = true;
    this.loop = this.run();
  }

  async stop(): Promise<void> {
    this.running = false;
    this.deps.redis.disconnect();
    await this.loop;
  }

  private async run(): Promise<void> {
    while (this.running) {
      try {
        const entries = await this.next();
        for (const [, event] of entries) await this.deliver(event);
        // One acknowledgement for the batch: a death before it re-delivers the batch (at least once).
        if (entries.length) await this.deps.redis.xack(keys.callbacks(), CALLBACK_GROUP, ...entries.map(([id]) => id));
      } catch (err) {
        if (!this.running) return;
        this.deps.log.warn({ err }, 'callback dispatch failed; retrying');
        await (this.deps.sleep ?? delay)(500);
      }
    }
  }

  /**
   * Entries left pending by a dead supervisor first, then new ones. Pending entries can only be
   * taken once idle for claimIdleMs, so they are looked for at most every half of that, not on
   * every wake: a busy stream costs one blocking read per batch.
   */
  private async next(): Promise<Array<[string, LaneEvent | undefined]>> {
    const { redis, consumer } = this.deps;
    const claimIdleMs = this.deps.claimIdleMs ?? CALLBACK_CLAIM_IDLE_MS;
    let entries: Array<[string, string[]]> = [];
    const now = performance.now();
    if (now >= this.nextClaimAt) {
      const claimed = (await redis.xautoclaim(keys.callbacks(), CALLBACK_GROUP, consumer, claimIdleMs, '0-0', 'COUNT', 50)) as [string, Array<[string, string[]] | null>];
      entries = (claimed[1] ?? []).filter((e): e is [string, string[]] => e !== null);
      // A full page may have more behind it: look again at once.
      if (entries.length < 50) this.nextClaimAt = now + claimIdleMs / 2;
    }
    if (entries.length === 0) {
      const blockMs = Math.max(1, Math.min(READ_BLOCK_MS, Math.ceil(this.nextClaimAt - performance.now())));
      const reply = (await redis.xreadgroup('GROUP', CALLBACK_GROUP, consumer, 'COUNT', 50, 'BLOCK', blockMs, 'STREAMS', keys.callbacks(), '>')) as Array<
        [string, Array<[string, string[]]>]
      > | null;
      entries = reply?.[0]?.[1] ?? [];
    }
    // An unreadable entry comes back undefined and is acknowledged as it is, so it cannot block the stream.
    return entries.map(([id, fields]) => {
      const parsed = LaneEventSchema.safeParse(JSON.parse(fields[fields.indexOf('e') + 1] ?? 'null'));
      return [id, parsed.success ? parsed.data : undefined];
    });
  }

  private async deliver(event: LaneEvent | undefined): Promise<void> {
    if (!event || !isNotified(event.type) || !event.cardId) return;
    const card = await this.deps.store.get(event.cardId);
    if (!card?.callbackUrl) return;
    const body = JSON.stringify({ event: event.type, at: event.at, card });
    const headers: Record<string, string> = { 'content-type': 'application/json', 'x-lanes-event': event.type, 'user-agent': 'lanes-callback' };
    const log = this.deps.log.child({ cardId: card.id, lane: card.lane, event: 'card.callback' });
    const url = new URL(card.callbackUrl);
    for (let attempt = 1; ; attempt++) {
      // Resolved on every attempt: a name may have moved inward since the last one.
      const target = await resolveCallbackTarget(url, this.deps.allow ?? [], this.deps.lookup ?? systemLookup);
      if (target.action === 'refuse') {
        this.deps.log.warn(
          { cardId: card.id, lane: card.lane, event: 'callback.refused', type: event.type, address: target.address, reason: target.reason },
          'callback refused: its target is inward',
        );
        return;
      }
      if (this.deps.secret) headers['x-lanes-signature'] = signBody(this.deps.secret, body, Math.floor((this.deps.now ?? Date.now)() / 1000));
      const result = target.action === 'unresolved' ? { error: target.reason } : await postTo(url, target, body, headers, this.deps.timeoutMs ?? CALLBACK_TIMEOUT_MS);
      const decision = evaluateCallback(result, attempt, this.deps.retry ?? DEFAULT_CALLBACK_RETRY);
      switch (decision.action) {
        case 'done':
          log.info({ type: event.type, reason: decision.reason }, 'callback delivered');
          return;
        case 'give-up':
          log.warn({ type: event.type, reason: decision.reason }, 'callback not delivered');
          return;
        case 'retry':
          log.info({ type: event.type, reason: decision.reason }, 'callback retry');
          await (this.deps.sleep ?? delay)(decision.delayMs);
      }
    }
  }
}

const delay = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
