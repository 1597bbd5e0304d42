import { describe, expect, it } from 'vitest';
import { CardRateLimiter, takeCards, type CardBucket, type CardRateDecision, type Principal } from '../src/index.js';

const RATE = { perSecond: 10, burst: 1_000 };

describe('takeCards: a token bucket of cards', () => {
  it.each<[string, CardBucket | undefined, number, number, CardRateDecision]>([
    ['a token not seen yet has a full bucket: one full bulk passes', undefined, 1_000, 0, { action: 'take', bucket: { cards: 0, atMs: 0 } }],
    ['an empty bucket refuses one card, saying when it will hold one', { cards: 0, atMs: 0 }, 1, 0, { action: 'refuse', bucket: { cards: 0, atMs: 0 }, retryAfterMs: 100 }],
    ['it refills at the rate', { cards: 0, atMs: 0 }, 5, 500, { action: 'take', bucket: { cards: 0, atMs: 500 } }],
    ['never past the burst', { cards: 990, atMs: 0 }, 1_000, 60_000, { action: 'take', bucket: { cards: 0, atMs: 60_000 } }],
    ['a refusal takes nothing, and the wait covers the whole request', { cards: 2, atMs: 0 }, 12, 0, { action: 'refuse', bucket: { cards: 2, atMs: 0 }, retryAfterMs: 1_000 }],
    ['a request past the burst waits only for a full bucket', { cards: 0, atMs: 0 }, 5_000, 0, { action: 'refuse', bucket: { cards: 0, atMs: 0 }, retryAfterMs: 100_000 }],
    ['a clock that went back refills nothing', { cards: 3, atMs: 1_000 }, 3, 500, { action: 'take', bucket: { cards: 0, atMs: 500 } }],
  ])('%s', (_name, bucket, want, nowMs, expected) => {
    expect(takeCards(bucket, want, nowMs, RATE)).toEqual(expected);
  });
});

describe('CardRateLimiter', () => {
  const board = (name: string, cardsPerSecond?: number): Principal => ({ name, role: 'write', lanes: '*', ...(cardsPerSecond !== undefined ? { cardsPerSecond } : {}) });

  it('keeps a bucket per token: one token spent leaves another whole; a principal without a rate is never refused', () => {
    let now = 0;
    const limiter = new CardRateLimiter(() => now);
    expect(limiter.take(board('a', 10), 1_000)).toEqual({ ok: true });
    expect(limiter.take(board('a', 10), 1)).toEqual({ ok: false, retryAfterMs: 100, perSecond: 10 });
    expect(limiter.take(board('b', 10), 1_000)).toEqual({ ok: true });
    for (let i = 0; i < 5; i++) expect(limiter.take(board('admin'), 1_000)).toEqual({ ok: true });
    now += 100;
    expect(limiter.take(board('a', 10), 1)).toEqual({ ok: true });
  });
});
