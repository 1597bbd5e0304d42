import { defaults } from '@lanes/contracts';
import { takeCards, type CardBucket, type CardRate } from './card-rate.js';
import type { Principal } from './principal.js';

export type RequestTake = { ok: true } | { ok: false; retryAfterMs: number; perSecond: number };

/** A token's request rate: `perSecond`, from a bucket of TOKEN_REQUEST_BURST_S seconds of it (at least one request). */
export function requestRate(perSecond: number): CardRate {
  return { perSecond, burst: Math.max(1, Math.ceil(perSecond * defaults.TOKEN_REQUEST_BURST_S)) };
}

/**
 * Each limited principal's bucket of requests, in this API process: what it guards is this
 * process's CPU and Redis connection, so unlike the card rate it is not shared, and asks Redis
 * nothing. One request takes one from the bucket by the card rate's arithmetic (takeCards). Keyed
 * by token name, so it holds at most one bucket per configured token.
 */
export class RequestRateLimiter {
  private readonly buckets = new Map<string, CardBucket>();
  private refusedCount = 0;

  constructor(private readonly now: () => number) {}

  /** Requests refused since this process started. */
  get refused(): number {
    return this.refusedCount;
  }

  take(principal: Principal): RequestTake {
    if (principal.requestsPerSecond === undefined) return { ok: true };
    const rate = requestRate(principal.requestsPerSecond);
    const decision = takeCards(this.buckets.get(principal.name), 1, this.now(), rate);
    this.buckets.set(principal.name, decision.bucket);
    if (decision.action === 'take') return { ok: true };
    this.refusedCount++;
    return { ok: false, retryAfterMs: decision.retryAfterMs, perSecond: rate.perSecond };
  }
}
