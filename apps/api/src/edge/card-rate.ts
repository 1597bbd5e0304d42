import type { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { takeSharedCards, type CardRate } from '@lanes/queue';
import type { Principal } from './principal.js';

export type { CardRate };

/** A token's bucket of cards: what it held at `atMs`. */
export interface CardBucket {
  readonly cards: number;
  readonly atMs: number;
}

export type CardRateDecision = { action: 'take'; bucket: CardBucket } | { action: 'refuse'; bucket: CardBucket; retryAfterMs: number };

/**
 * Whether `want` cards may be posted now from `bucket` (undefined: a token not seen yet, whose
 * bucket is full), and the bucket after. The bucket refills at `perSecond` up to `burst`; a request
 * it cannot cover takes nothing and is told when it could be. The specification of the shared
 * bucket's script (libs/queue card-rate-bucket.ts), which is tested against the same table.
 */
export function takeCards(bucket: CardBucket | undefined, want: number, nowMs: number, rate: CardRate): CardRateDecision {
  const elapsedMs = bucket === undefined ? 0 : Math.max(0, nowMs - bucket.atMs);
  const cards = bucket === undefined ? rate.burst : Math.min(rate.burst, bucket.cards + (elapsedMs * rate.perSecond) / 1_000);
  if (want <= cards) return { action: 'take', bucket: { cards: cards - want, atMs: nowMs } };
  const short = Math.min(want, rate.burst) - cards;
  return { action: 'refuse', bucket: { cards, atMs: nowMs }, retryAfterMs: Math.ceil((short * 1_000) / rate.perSecond) };
}

/**
 * Each limited principal's bucket, in Redis: a configured token's rate holds across every API
 * process (two replicas must not give a token twice its rate). `now` replaces Redis's clock (tests).
 */
export class CardRateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly now?: () => number,
  ) {}

  /** Takes `want` cards from the principal's bucket; answers how long to wait when it cannot. A principal without a rate always may. */
  async take(principal: Principal, want: number): Promise<{ ok: true } | { ok: false; retryAfterMs: number; perSecond: number }> {
    if (principal.cardsPerSecond === undefined) return { ok: true };
    const rate = { perSecond: principal.cardsPerSecond, burst: defaults.MAX_BULK_CARDS };
    const taken = await takeSharedCards(this.redis, principal.name, want, rate, this.now?.());
    return taken.ok ? taken : { ...taken, perSecond: rate.perSecond };
  }
}
