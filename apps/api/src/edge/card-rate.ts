import { defaults } from '@lanes/contracts';
import type { Principal } from './principal.js';

/** A token's bucket of cards: what it held at `atMs`. */
export interface CardBucket {
  readonly cards: number;
  readonly atMs: number;
}

export interface CardRate {
  readonly perSecond: number;
  /** What a full bucket holds: MAX_BULK_CARDS, so one full bulk passes. */
  readonly burst: number;
}

export type CardRateDecision = { action: 'take'; bucket: CardBucket } | { action: 'refuse'; bucket: CardBucket; retryAfterMs: number };

/**
 * Whether `want` cards may be posted now from `bucket` (undefined: a token not seen yet, whose
 * bucket is full), and the bucket after. The bucket refills at `perSecond` up to `burst`; a request
 * it cannot cover takes nothing and is told when it could be.
 */
export function takeCards(bucket: CardBucket | undefined, want: number, nowMs: number, rate: CardRate): CardRateDecision {
  const elapsedMs = bucket === undefined ? 0 : Math.max(0, nowMs - bucket.atMs);
  const cards = bucket === undefined ? rate.burst : Math.min(rate.burst, bucket.cards + (elapsedMs * rate.perSecond) / 1_000);
  if (want <= cards) return { action: 'take', bucket: { cards: cards - want, atMs: nowMs } };
  const short = Math.min(want, rate.burst) - cards;
  return { action: 'refuse', bucket: { cards, atMs: nowMs }, retryAfterMs: Math.ceil((short * 1_000) / rate.perSecond) };
}

/** Each limited principal's bucket, in this API process (a principal is a configured token, so the map is bounded by the config). */
export class CardRateLimiter {
  private readonly buckets = new Map<string, CardBucket>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Takes `want` cards from the principal's bucket; answers how long to wait when it cannot. A principal without a rate always may. */
  take(principal: Principal, want: number): { ok: true } | { ok: false; retryAfterMs: number; perSecond: number } {
    if (principal.cardsPerSecond === undefined) return { ok: true };
    const rate = { perSecond: principal.cardsPerSecond, burst: defaults.MAX_BULK_CARDS };
    const decision = takeCards(this.buckets.get(principal.name), want, this.now(), rate);
    this.buckets.set(principal.name, decision.bucket);
    return decision.action === 'take' ? { ok: true } : { ok: false, retryAfterMs: decision.retryAfterMs, perSecond: rate.perSecond };
  }
}
