import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLanesConfig } from '@lanes/contracts';
import { useRedis } from '../../../test/harness/index.js';
import { CardRateLimiter, createApiServer, takeCards, type ApiServer, type CardBucket, type CardRateDecision, type Principal } from '../src/index.js';

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

describe('POST /v1/cards is charged by its body size before the body is read (real Redis)', () => {
  const f = useRedis();
  let api: ApiServer;
  const TOKEN = 'slow-board-token-value-4b7e';
  const lanes = parseLanesConfig({ lanes: [{ name: 'rated', agent: ['true'] }] }).lanes;

  beforeAll(async () => {
    api = await createApiServer({
      redis: f.conn,
      lanes,
      log: pino({ level: 'silent' }),
      scopedTokens: [{ name: 'slow-board', fromEnv: 'SLOW_BOARD_TOKEN', lanes: ['rated'], role: 'write', cardsPerSecond: 1 }],
      tokenEnv: { SLOW_BOARD_TOKEN: TOKEN },
    });
  });
  afterAll(async () => {
    await api?.close();
  });

  it('two 8 MiB bodies spend a full bucket; the third is 429 RATE_LIMITED before it is parsed, though it holds one card', async () => {
    // One card whose metadata is far over its cap: a body the API must parse before it can refuse it.
    const payload = JSON.stringify({ lane: 'rated', title: 't', metadata: { pad: 'x'.repeat(8 * 1024 * 1024 - 100) } });
    const post = () => api.app.inject({ method: 'POST', url: '/v1/cards', headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' }, payload });
    for (let i = 0; i < 2; i++) {
      const parsed = await post();
      expect(parsed.statusCode).toBe(400);
      expect(parsed.json()).toMatchObject({ error: { issues: [{ path: 'metadata' }] } });
    }
    const refused = await post();
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ error: { code: 'RATE_LIMITED' } });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
  });
});
