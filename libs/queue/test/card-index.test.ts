import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BlockedReasonSchema, CardStateSchema, defaults, type BlockedReason, type Card, type CardState } from '@lanes/contracts';
import { CardList, CardStore, createRedis, keys, type CardMove, type CardWriter } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

/** Fixed clock: index scores are exact. */
const T0 = Date.UTC(2025, 0, 2, 3, 4, 5);
const DAY_MS = defaults.MS_PER_DAY;

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/**
 * The listing indexes as the move scripts keep them, on a real redis-server: through every legal
 * move, each card is in exactly the index of its state (and, blocked, of its reason), scored by its
 * last move's time; terminal sets drop what retention expired; a page reads only what it answers.
 */
describe('card listing indexes on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let nowMs = T0;
  let store: CardStore;
  let list: CardList;
  const lane = uid('lane');

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    store = new CardStore({ redis, now: () => nowMs, lanes: [{ name: lane, retention: { terminalCardDays: 1 } }] });
    list = new CardList({ redis, now: () => nowMs });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (over: Partial<Card> = {}): Card => ({ id: uid('card'), lane, title: 'Fix flaky test', priority: 0, ...over });
  const board: CardWriter = { kind: 'board' };
  /** BullMQ's lock of the card's job, held by `token`: what a worker taking the job holds. */
  const runAs = async (card: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(card.lane, card.id), token);
    return { kind: 'run', token };
  };
  /** Every listing index of the lane that names the card, with its score. */
  const membership = async (card: Card) => {
    const found: Record<string, number> = {};
    const sets = [
      ...CardStateSchema.options.map((s) => [`state:${s}`, keys.cardIndex(card.lane, s)] as const),
      ...BlockedReasonSchema.options.map((r) => [`reason:${r}`, keys.blockedReasonIndex(card.lane, r)] as const),
    ];
    for (const [name, key] of sets) {
      const score = await redis.zscore(key, card.id);
      if (score !== null) found[name] = Number(score);
    }
    return found;
  };
  const expected = (state: CardState, score: number, reason?: BlockedReason) => ({ [`state:${state}`]: score, ...(reason ? { [`reason:${reason}`]: score } : {}) });

  /** Brings a new card to `from` (at T0 + 1 s, and so on), answering the writer that holds it. */
  const cardIn = async (from: CardState | `blocked:${BlockedReason}`): Promise<{ card: Card; run: CardWriter }> => {
    const card = newCard();
    nowMs = T0;
    await store.create(card);
    const run = await runAs(card, 'run-a');
    const step = async (move: CardMove, writer: CardWriter) => {
      nowMs += 1_000;
      expect((await store.transition(card, move, writer)).ok).toBe(true);
    };
    if (from === 'queued') return { card, run };
    if (from === 'cancelled') {
      // Cancelled before it ran: its job was removed, so no lock either.
      await redis.del(keys.jobLock(card.lane, card.id));
      await step({ to: 'cancelled', attempt: 0 }, board);
      return { card, run };
    }
    await step({ to: 'running', attempt: 1, sandboxId: 'sb' }, run);
    if (from.startsWith('blocked:')) {
      await step({ to: 'blocked', attempt: 1, blockedReason: from.slice('blocked:'.length) as BlockedReason, retryAt: nowMs + 60_000 }, run);
    } else if (from === 'done') await step({ to: 'done', attempt: 1 }, run);
    else if (from === 'failed') await step({ to: 'failed', attempt: 1, failedReason: 'command-failed' }, run);
    // BullMQ's finishing move releases the lock of a job whose card ended.
    if (from === 'done' || from === 'failed') await redis.del(keys.jobLock(card.lane, card.id));
    return { card, run };
  };

  type Row = [name: string, from: Parameters<typeof cardIn>[0], move: CardMove, writer: 'run' | 'board' | 'takeover' | 'retry'];
  const ROWS: Row[] = [
    ['queued → queued (re-drive)', 'queued', { to: 'queued', attempt: 0, event: 'card.redriven' }, 'board'],
    ['queued → running', 'queued', { to: 'running', attempt: 1, sandboxId: 'sb' }, 'run'],
    ['queued → blocked (provider-outage)', 'queued', { to: 'blocked', attempt: 0, blockedReason: 'provider-outage', retryAt: T0 + 60_000 }, 'run'],
    ['queued → cancelled', 'queued', { to: 'cancelled', attempt: 0 }, 'board'],
    ['running → running (takeover)', 'running', { to: 'running', attempt: 1, sandboxId: 'sb-2' }, 'takeover'],
    ['running → queued (hand-back)', 'running', { to: 'queued', attempt: 1 }, 'run'],
    ['running → blocked (sandbox-dead)', 'running', { to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: T0 + 60_000 }, 'run'],
    ['running → done', 'running', { to: 'done', attempt: 1 }, 'run'],
    ['running → failed', 'running', { to: 'failed', attempt: 1, failedReason: 'command-failed' }, 'run'],
    ['running → cancelled', 'running', { to: 'cancelled', attempt: 1 }, 'run'],
    ['blocked → queued (unblock)', 'blocked:needs-human', { to: 'queued', attempt: 1, event: 'card.unblocked' }, 'board'],
    ['blocked → running (re-run)', 'blocked:sandbox-dead', { to: 'running', attempt: 1, sandboxId: 'sb-2' }, 'run'],
    ['blocked → blocked (another reason)', 'blocked:sandbox-dead', { to: 'blocked', attempt: 1, blockedReason: 'provider-outage', retryAt: T0 + 60_000 }, 'run'],
    ['blocked → blocked (the same reason)', 'blocked:provider-outage', { to: 'blocked', attempt: 1, blockedReason: 'provider-outage', retryAt: T0 + 60_000 }, 'run'],
    ['blocked → cancelled', 'blocked:needs-human', { to: 'cancelled', attempt: 1 }, 'board'],
    ['failed → queued (retry)', 'failed', { to: 'queued', attempt: 0 }, 'retry'],
    ['cancelled → queued (retry)', 'cancelled', { to: 'queued', attempt: 0 }, 'retry'],
  ];

  it.each(ROWS)('%s: out of the old index, into the new one, scored by the move', async (_name, from, move, writerKind) => {
    const { card, run } = await cardIn(from);
    const before = await membership(card);
    const fromState = from.startsWith('blocked:') ? 'blocked' : (from as CardState);
    const fromReason = from.startsWith('blocked:') ? (from.slice('blocked:'.length) as BlockedReason) : undefined;
    expect(before).toEqual(expected(fromState, nowMs, fromReason));

    nowMs += 1_000;
    if (writerKind === 'retry') {
      expect(await store.retry(card, { message: 'retried', job: { kind: 'clear' } })).toEqual({ ok: true });
    } else {
      const writer = writerKind === 'board' ? board : writerKind === 'run' ? run : await runAs(card, 'run-b');
      expect((await store.transition(card, move, writer)).ok).toBe(true);
    }
    expect(await membership(card)).toEqual(expected(move.to, nowMs, move.to === 'blocked' ? move.blockedReason : undefined));
  });

  it.each(ROWS)('%s, tried on a done card, is refused and leaves the indexes as they were', async (_name, _from, move, writerKind) => {
    const { card, run } = await cardIn('done');
    const before = await membership(card);
    nowMs += 1_000;
    if (writerKind === 'retry') expect(await store.retry(card, { message: 'retried', job: { kind: 'clear' } })).toEqual({ ok: false, refusal: 'illegal', state: 'done' });
    else expect((await store.transition(card, move, writerKind === 'board' ? board : run)).ok).toBe(false);
    expect(await membership(card)).toEqual(before);
  });

  it('a stale run’s write (its lock lost) leaves the indexes as they were', async () => {
    const { card, run } = await cardIn('running');
    const before = await membership(card);
    await redis.del(keys.jobLock(card.lane, card.id));
    nowMs += 1_000;
    expect(await store.transition(card, { to: 'done', attempt: 1 }, run)).toMatchObject({ ok: false, refusal: 'stale' });
    expect(await membership(card)).toEqual(before);
  });

  it('a new card is in its lane’s queued index, scored by its creation, in either create path', async () => {
    nowMs = T0 + 5;
    const [a, b] = [newCard(), newCard()];
    await store.create(a);
    await store.createMany([b]);
    expect(await membership(a)).toEqual(expected('queued', T0 + 5));
    expect(await membership(b)).toEqual(expected('queued', T0 + 5));
  });

  it('a move stamped earlier than the card’s last one (another writer’s clock) keeps the later score: a card never moves down a listing', async () => {
    const { card, run } = await cardIn('running');
    const last = nowMs;
    nowMs = last - 30_000;
    expect((await store.transition(card, { to: 'done', attempt: 1 }, run)).ok).toBe(true);
    expect(await membership(card)).toEqual(expected('done', last));
  });

  it('a terminal move trims the entries older than the lane’s retention from its set, and gives the set the retention', async () => {
    const old = await cardIn('running');
    expect((await store.transition(old.card, { to: 'done', attempt: 1 }, old.run)).ok).toBe(true);
    const oldScore = nowMs;
    const done = keys.cardIndex(lane, 'done');
    expect(await redis.zscore(done, old.card.id)).toBe(String(oldScore));
    const ttl = await redis.pttl(done);
    expect(ttl).toBeGreaterThan(DAY_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(DAY_MS);

    // One day later to the ms the old card's keys would just have expired: its entry stays until the next ms.
    const later = await cardIn('running');
    nowMs = oldScore + DAY_MS;
    expect((await store.transition(later.card, { to: 'done', attempt: 1 }, later.run)).ok).toBe(true);
    expect(await redis.zscore(done, old.card.id)).toBe(String(oldScore));
    const last = await cardIn('running');
    nowMs = oldScore + DAY_MS + 1;
    expect((await store.transition(last.card, { to: 'done', attempt: 1 }, last.run)).ok).toBe(true);
    expect(await redis.zscore(done, old.card.id)).toBeNull();
    expect(await redis.zscore(done, later.card.id)).not.toBeNull();
  });

  it('a page skips and removes an entry whose card is gone or moved on without it, and answers the rest', async () => {
    const listLane = uid('lane');
    const cards = [newCard({ lane: listLane }), newCard({ lane: listLane }), newCard({ lane: listLane })];
    for (const [i, c] of cards.entries()) {
      nowMs = T0 + i;
      await store.create(c);
    }
    // The middle card expired: its record is gone, its entry lingers.
    await redis.del(keys.card(cards[1]!.id));
    // An entry that names a card of another lane (an id made again there).
    await redis.zadd(keys.cardIndex(listLane, 'queued'), T0 + 1, cards[0]!.id.replace('card', 'other'));
    nowMs = T0 + 10;
    const out = await list.page({ lanes: [listLane], limit: 10 });
    expect(out.ok && out.page.cards.map((c) => c.id)).toEqual([cards[2]!.id, cards[0]!.id]);
    expect(await redis.zrange(keys.cardIndex(listLane, 'queued'), 0, -1)).toEqual([cards[0]!.id, cards[2]!.id]);
  });
});
