import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLanesConfig } from '@lanes/contracts';
import { keys, takeSharedCards } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';
import { CardRateLimiter, createApiServer, takeCards, type ApiServer, type CardBucket, type CardRateDecision, type Principal } from '../src/index.js';

const RATE = { perSecond: 10, burst: 1_000 };

type RateCase = [string, CardBucket | undefined, number, number, CardRateDecision];
const CASES: RateCase[] = [
  ['a token not seen yet has a full bucket: one full bulk passes', undefined, 1_000, 0, { action: 'take', bucket: { cards: 0, atMs: 0 } }],
  ['an empty bucket refuses one card, saying when it will hold one', { cards: 0, atMs: 0 }, 1, 0, { action: 'refuse', bucket: { cards: 0, atMs: 0 }, retryAfterMs: 100 }],
  ['it refills at the rate', { cards: 0, atMs: 0 }, 5, 500, { action: 'take', bucket: { cards: 0, atMs: 500 } }],
  ['never past the burst', { cards: 990, atMs: 0 }, 1_000, 60_000, { action: 'take', bucket: { cards: 0, atMs: 60_000 } }],
  ['a refusal takes nothing, and the wait covers the whole request', { cards: 2, atMs: 0 }, 12, 0, { action: 'refuse', bucket: { cards: 2, atMs: 0 }, retryAfterMs: 1_000 }],
  ['a request past the burst waits only for a full bucket', { cards: 0, atMs: 0 }, 5_000, 0, { action: 'refuse', bucket: { cards: 0, atMs: 0 }, retryAfterMs: 100_000 }],
  ['a clock that went back refills nothing', { cards: 3, atMs: 1_000 }, 3, 500, { action: 'take', bucket: { cards: 0, atMs: 500 } }],
  ['a fraction of a card refilled counts toward the next', { cards: 0.5, atMs: 0 }, 1, 50, { action: 'take', bucket: { cards: 0, atMs: 50 } }],
];

describe('takeCards: a token bucket of cards', () => {
  it.each(CASES)('%s', (_name, bucket, want, nowMs, expected) => {
    expect(takeCards(bucket, want, nowMs, RATE)).toEqual(expected);
  });
});

describe("the shared bucket's script agrees with takeCards, case by case (real Redis)", () => {
  const f = useRedis();
  it.each(CASES)('%s', async (name, bucket, want, nowMs, expected) => {
    const token = `case-${CASES.findIndex((c) => c[0] === name)}`;
    await f.conn.del(keys.cardRate(token));
    if (bucket) await f.conn.hset(keys.cardRate(token), 'cards', String(bucket.cards), 'at', String(bucket.atMs));
    const taken = await takeSharedCards(f.conn, token, want, RATE, nowMs);
    expect(taken).toEqual(expected.action === 'take' ? { ok: true } : { ok: false, retryAfterMs: expected.retryAfterMs });
    const [cards, at] = await f.conn.hmget(keys.cardRate(token), 'cards', 'at');
    expect({ cards: Number(cards), atMs: Number(at) }).toEqual(expected.bucket);
    // Gone once a full refill would restore it.
    expect(await f.conn.pttl(keys.cardRate(token))).toBeLessThanOrEqual((RATE.burst * 1_000) / RATE.perSecond);
  });
});

describe('CardRateLimiter', () => {
  const f = useRedis();
  const board = (name: string, cardsPerSecond?: number): Principal => ({ name, role: 'write', lanes: '*', ...(cardsPerSecond !== undefined ? { cardsPerSecond } : {}) });

  it('keeps a bucket per token: one token spent leaves another whole; a principal without a rate is never refused', async () => {
    let now = 0;
    const limiter = new CardRateLimiter(f.conn, () => now);
    expect(await limiter.take(board('a', 10), 1_000)).toEqual({ ok: true });
    expect(await limiter.take(board('a', 10), 1)).toEqual({ ok: false, retryAfterMs: 100, perSecond: 10 });
    expect(await limiter.take(board('b', 10), 1_000)).toEqual({ ok: true });
    for (let i = 0; i < 5; i++) expect(await limiter.take(board('admin'), 1_000)).toEqual({ ok: true });
    now += 100;
    expect(await limiter.take(board('a', 10), 1)).toEqual({ ok: true });
  });

  it('two API processes draw from one bucket: a token spent on one is spent on the other', async () => {
    let now = 0;
    const other = f.conn.duplicate();
    try {
      const replicas = [new CardRateLimiter(f.conn, () => now), new CardRateLimiter(other, () => now)];
      expect(await replicas[0]!.take(board('shared', 10), 1_000)).toEqual({ ok: true });
      expect(await replicas[1]!.take(board('shared', 10), 1)).toEqual({ ok: false, retryAfterMs: 100, perSecond: 10 });
      now += 100;
      expect(await replicas[1]!.take(board('shared', 10), 1)).toEqual({ ok: true });
      expect(await replicas[0]!.take(board('shared', 10), 1)).toEqual({ ok: false, retryAfterMs: 100, perSecond: 10 });
    } finally {
      other.disconnect();
    }
  });
});

describe('POST /v1/cards is charged by its body size before the body is read (real Redis)', () => {
  const f = useRedis();
  let api: ApiServer;
  let replica: ApiServer;
  const TOKEN = 'slow-board-token-value-4b7e';
  // A card each 100 s: no wait in the test refills one.
  const SLOWER = 'slower-board-token-value-c91d';
  const lanes = parseLanesConfig({ lanes: [{ name: 'rated', agent: ['true'] }] }).lanes;
  const start = () =>
    createApiServer({
      redis: f.conn,
      lanes,
      log: pino({ level: 'silent' }),
      scopedTokens: [
        { name: 'slow-board', fromEnv: 'SLOW_BOARD_TOKEN', lanes: ['rated'], role: 'write', cardsPerSecond: 1 },
        { name: 'slower-board', fromEnv: 'SLOWER_BOARD_TOKEN', lanes: ['rated'], role: 'write', cardsPerSecond: 0.01 },
      ],
      tokenEnv: { SLOW_BOARD_TOKEN: TOKEN, SLOWER_BOARD_TOKEN: SLOWER },
    });

  beforeAll(async () => {
    api = await start();
    replica = await start();
  });
  afterAll(async () => {
    await api?.close();
    await replica?.close();
  });

  it('a token that spent its bucket on one API process is refused by another on the same Redis', async () => {
    const post = (server: ApiServer, body: unknown) =>
      server.app.inject({ method: 'POST', url: '/v1/cards', headers: { authorization: `Bearer ${SLOWER}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) });
    const bulk = { cards: Array.from({ length: 1_000 }, (_, i) => ({ id: `spent-${i}`, lane: 'rated', title: 't' })) };
    expect((await post(api, bulk)).statusCode).toBe(202);
    const refused = await post(replica, { id: 'on-the-replica', lane: 'rated', title: 't' });
    expect([refused.statusCode, refused.json().error.code]).toEqual([429, 'RATE_LIMITED']);
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(90);
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
