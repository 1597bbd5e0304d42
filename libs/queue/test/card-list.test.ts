import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Card, CardState, CardSummary } from '@lanes/contracts';
import { CARD_LIST_STALE_SKIP_MAX, CardList, CardStore, createRedis, indexSourcesFor, keys, type CardListRequest, type CardWriter } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const T0 = Date.UTC(2025, 0, 2, 3, 4, 5);
const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/** Listing pages over the indexes on a real redis-server: order, filters, cursors, and paging while cards move. */
describe('card listing on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let nowMs = T0;
  let store: CardStore;
  let list: CardList;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    store = new CardStore({ redis, now: () => nowMs });
    list = new CardList({ redis, now: () => nowMs });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (lane: string, over: Partial<Card> = {}): Card => ({ id: uid('card'), lane, title: 'Fix flaky test', priority: 0, ...over });
  const runAs = async (card: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(card.lane, card.id), token);
    return { kind: 'run', token };
  };
  const page = async (request: CardListRequest) => {
    const out = await list.page(request);
    if (!out.ok) throw new Error(out.message);
    return out.page;
  };
  /** Every page of a listing, in order; `between` runs after each page. */
  const allPages = async (request: CardListRequest, between: () => Promise<void> = async () => undefined) => {
    const pages: CardSummary[][] = [];
    let cursor: string | undefined;
    do {
      const p = await page({ ...request, ...(cursor ? { cursor } : {}) });
      pages.push(p.cards);
      cursor = p.nextCursor;
      await between();
    } while (cursor);
    return pages;
  };

  it('indexSourcesFor: one set per lane and state; a blocked reason reads its own set; no state reads every state', () => {
    expect(indexSourcesFor(['a'], { state: 'failed' })).toEqual([{ key: keys.cardIndex('a', 'failed'), lane: 'a', state: 'failed' }]);
    expect(indexSourcesFor(['a', 'b'], { blockedReason: 'needs-human' })).toEqual([
      { key: keys.blockedReasonIndex('a', 'needs-human'), lane: 'a', state: 'blocked', blockedReason: 'needs-human' },
      { key: keys.blockedReasonIndex('b', 'needs-human'), lane: 'b', state: 'blocked', blockedReason: 'needs-human' },
    ]);
    expect(indexSourcesFor(['a'], { state: 'blocked' })).toEqual([{ key: keys.blocked('a'), lane: 'a', state: 'blocked' }]);
    expect(indexSourcesFor(['a'], {}).map((s) => s.state)).toEqual(['queued', 'running', 'done', 'failed', 'cancelled', 'blocked']);
    expect(indexSourcesFor([], {})).toEqual([]);
  });

  it('newest update first across lanes and states; ties (one bulk, one ms) in id order, descending; pages meet without a gap', async () => {
    const [a, b] = [uid('lane'), uid('lane')];
    nowMs = T0;
    const bulk = Array.from({ length: 12 }, () => newCard(a));
    await store.createMany(bulk);
    nowMs = T0 + 10;
    const later = newCard(b);
    await store.create(later);
    nowMs = T0 + 20;
    const moved = bulk[3]!;
    await store.transition(moved, { to: 'running', attempt: 1, sandboxId: 'sb' }, await runAs(moved, 'r'));
    nowMs = T0 + 30;
    const pages = await allPages({ lanes: [a, b], limit: 5 });
    expect(pages.map((p) => p.length)).toEqual([5, 5, 3]);
    const ties = bulk
      .filter((c) => c !== moved)
      .map((c) => c.id)
      .sort()
      .reverse();
    expect(pages.flat().map((c) => c.id)).toEqual([moved.id, later.id, ...ties]);
    expect(pages.flat()[0]).toMatchObject({ id: moved.id, lane: a, state: 'running', attempts: 1, sandboxId: 'sb', updatedAt: new Date(T0 + 20).toISOString() });
  });

  it('a summary leaves out prompt, metadata and history', async () => {
    const lane = uid('lane');
    nowMs = T0;
    const card = newCard(lane, { prompt: 'x'.repeat(10_000), metadata: { big: 'y'.repeat(1_000) }, pr: { number: 7, branch: 'fix/x' } });
    await store.create(card);
    nowMs = T0 + 1;
    const [summary] = (await page({ lanes: [lane], limit: 10 })).cards;
    expect(summary).toEqual({
      id: card.id,
      lane,
      title: card.title,
      pr: { number: 7, branch: 'fix/x' },
      priority: 0,
      state: 'queued',
      attempts: 0,
      infraRetries: 0,
      createdAt: new Date(T0).toISOString(),
      updatedAt: new Date(T0).toISOString(),
    });
  });

  it('filters: state, blocked reason, updatedSince (inclusive); the snapshot leaves out what moved at or after it', async () => {
    const lane = uid('lane');
    const cards = Array.from({ length: 6 }, () => newCard(lane));
    nowMs = T0;
    await store.createMany(cards);
    const [c0, c1, c2, c3] = cards;
    const block = async (c: Card, reason: 'needs-human' | 'sandbox-dead', at: number) => {
      nowMs = at;
      const run = await runAs(c, `r-${c.id}`);
      await store.transition(c, { to: 'running', attempt: 1, sandboxId: 'sb' }, run);
      await store.transition(c, { to: 'blocked', attempt: 1, blockedReason: reason, retryAt: at + 60_000 }, run);
    };
    await block(c0!, 'needs-human', T0 + 100);
    await block(c1!, 'sandbox-dead', T0 + 200);
    await block(c2!, 'needs-human', T0 + 300);
    nowMs = T0 + 400;
    await store.transition(c3!, { to: 'cancelled', attempt: 0 }, { kind: 'board' });
    nowMs = T0 + 1_000;
    const ids = async (request: Omit<CardListRequest, 'lanes' | 'limit'>) => (await page({ lanes: [lane], limit: 50, ...request })).cards.map((c) => c.id);
    expect(await ids({ state: 'blocked' })).toEqual([c2!.id, c1!.id, c0!.id]);
    expect(await ids({ blockedReason: 'needs-human' })).toEqual([c2!.id, c0!.id]);
    expect(await ids({ state: 'blocked', blockedReason: 'sandbox-dead' })).toEqual([c1!.id]);
    expect(await ids({ state: 'cancelled' })).toEqual([c3!.id]);
    expect(await ids({ state: 'done' })).toEqual([]);
    expect(await ids({ updatedSinceMs: T0 + 200 })).toEqual([c3!.id, c2!.id, c1!.id]);
    expect(await ids({ updatedSinceMs: T0 + 201 })).toEqual([c3!.id, c2!.id]);
    // The first page's clock is the snapshot: a card moved at that very ms is the next listing's.
    nowMs = T0 + 300;
    expect(await ids({ state: 'blocked' })).toEqual([c1!.id, c0!.id]);
  });

  it('a cursor is for its own filter: another filter, or anything but a cursor, is refused naming why', async () => {
    const lane = uid('lane');
    nowMs = T0;
    await store.createMany([newCard(lane), newCard(lane)]);
    nowMs = T0 + 1;
    const first = await page({ lanes: [lane], limit: 1, state: 'queued' });
    expect(first.nextCursor).toBeDefined();
    expect(await list.page({ lanes: [lane], limit: 1, state: 'running', cursor: first.nextCursor! })).toMatchObject({
      ok: false,
      issue: 'cursor',
      message: expect.stringContaining('another filter'),
    });
    for (const junk of ['x', 'bm90IGpzb24', Buffer.from('[2,1,2,"a","b"]').toString('base64url')]) {
      expect(await list.page({ lanes: [lane], limit: 1, cursor: junk })).toMatchObject({ ok: false, issue: 'cursor' });
    }
    const second = await page({ lanes: [lane], limit: 1, state: 'queued', cursor: first.nextCursor! });
    expect(second.cards).toHaveLength(1);
    expect(second.nextCursor).toBeUndefined();
    expect(second.snapshotAt).toBe(first.snapshotAt);
  });

  it('a page that meets more stale entries than it may skip ends early with a cursor, and the listing goes on from there', async () => {
    const lane = uid('lane');
    nowMs = T0;
    const kept = [newCard(lane), newCard(lane)];
    await store.create(kept[0]!);
    // Entries of cards that expired, newer than the first card and older than the second.
    const stale = Array.from({ length: CARD_LIST_STALE_SKIP_MAX + 20 }, (_, i) => [T0 + 1 + i, `gone-${i}`] as const);
    await redis.zadd(keys.cardIndex(lane, 'queued'), ...stale.flat());
    nowMs = T0 + 10_000;
    await store.create(kept[1]!);
    nowMs = T0 + 20_000;
    const first = await page({ lanes: [lane], limit: 5 });
    expect(first.cards.map((c) => c.id)).toEqual([kept[1]!.id]);
    expect(first.nextCursor).toBeDefined();
    const second = await page({ lanes: [lane], limit: 5, cursor: first.nextCursor! });
    expect(second.cards.map((c) => c.id)).toEqual([kept[0]!.id]);
    expect(second.nextCursor).toBeUndefined();
    expect(await redis.zcard(keys.cardIndex(lane, 'queued'))).toBe(2);
  });

  it('between pages: a card already answered that moves is not answered again; one not yet answered is answered once, or not at all if it no longer fits', async () => {
    const lane = uid('lane');
    const cards = Array.from({ length: 6 }, () => newCard(lane));
    for (const [i, c] of cards.entries()) {
      nowMs = T0 + i * 10;
      await store.create(c);
    }
    // Newest first: c5 c4 | c3 c2 | c1 c0.
    const ids = cards.map((c) => c.id).reverse();
    nowMs = T0 + 100;
    const first = await page({ lanes: [lane], limit: 2 });
    expect(first.cards.map((c) => c.id)).toEqual(ids.slice(0, 2));
    // Answered c5 moves (still in the lane); unanswered c3 moves with a clock behind the snapshot
    // (another writer's); unanswered c1 is cancelled after the snapshot.
    nowMs = T0 + 200;
    await store.transition(cards[5]!, { to: 'running', attempt: 1, sandboxId: 'sb' }, await runAs(cards[5]!, 'r5'));
    nowMs = T0 + 1;
    await store.transition(cards[3]!, { to: 'running', attempt: 1, sandboxId: 'sb' }, await runAs(cards[3]!, 'r3'));
    nowMs = T0 + 300;
    await store.transition(cards[1]!, { to: 'cancelled', attempt: 0 }, { kind: 'board' });
    const rest = await allPages({ lanes: [lane], limit: 2, cursor: first.nextCursor! });
    expect(rest.flat().map((c) => [c.id, c.state])).toEqual([
      [cards[3]!.id, 'running'],
      [cards[2]!.id, 'queued'],
      [cards[0]!.id, 'queued'],
    ]);
    // The same listing by state: c1, cancelled after the snapshot, is not among the queued ones any more.
    nowMs = T0 + 400;
    const queued = (await allPages({ lanes: [lane], limit: 1, state: 'queued' })).flat().map((c) => c.id);
    expect(queued).toEqual([cards[4]!.id, cards[2]!.id, cards[0]!.id]);
  });

  it('paging meets every card once while the cards keep moving: no card twice, every unmoved card exactly once', async () => {
    const lane = uid('lane');
    const live = new CardStore({ redis, now: Date.now });
    const liveList = new CardList({ redis, now: Date.now });
    const cards = Array.from({ length: 400 }, () => newCard(lane));
    for (let i = 0; i < cards.length; i += 100) await live.createMany(cards.slice(i, i + 100));
    const stateOf = new Map<string, CardState>(cards.map((c) => [c.id, 'queued']));
    const moved = new Set<string>();
    const writer = new Map<string, CardWriter>();
    /** One step along queued → running → (done | queued | blocked → queued …), for a random card. */
    const moveOne = async () => {
      const c = cards[Math.floor(Math.random() * cards.length)]!;
      moved.add(c.id);
      const state = stateOf.get(c.id)!;
      let w = writer.get(c.id);
      if (!w) {
        w = await runAs(c, `run-${c.id}`);
        writer.set(c.id, w);
      }
      const pick = Math.random();
      const next: CardState | undefined =
        state === 'queued' ? 'running' : state === 'running' ? (pick < 0.4 ? 'done' : pick < 0.7 ? 'queued' : 'blocked') : state === 'blocked' ? 'queued' : undefined;
      if (!next) return;
      const move =
        next === 'running'
          ? ({ to: 'running', attempt: 1, sandboxId: 'sb' } as const)
          : next === 'blocked'
            ? ({ to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: Date.now() + 60_000 } as const)
            : next === 'done'
              ? ({ to: 'done', attempt: 1 } as const)
              : ({ to: 'queued', attempt: 1, event: 'card.redriven' } as const);
      const out = await live.transition(c, move, state === 'blocked' && next === 'queued' ? { kind: 'board' } : w);
      if (out.ok) stateOf.set(c.id, next);
    };

    for (const filter of [{}, { state: 'queued' as const }]) {
      moved.clear();
      const before = new Map(stateOf);
      // Moves run between pages and alongside them (several in flight while a page is read).
      const listed: string[] = [];
      let cursor: string | undefined;
      let pages = 0;
      do {
        const flight = Array.from({ length: 6 }, () => moveOne());
        const out = await liveList.page({ lanes: [lane], limit: 9, ...filter, ...(cursor ? { cursor } : {}) });
        await Promise.all(flight);
        if (!out.ok) throw new Error(out.message);
        listed.push(...out.page.cards.map((c) => c.id));
        for (const c of out.page.cards) if (filter.state) expect(c.state).toBe(filter.state);
        cursor = out.page.nextCursor;
        pages++;
      } while (cursor);
      expect(pages).toBeGreaterThan(10);
      expect(new Set(listed).size).toBe(listed.length);
      const fitting = cards.filter((c) => (filter.state ? before.get(c.id) === filter.state : true));
      const unmoved = fitting.filter((c) => !moved.has(c.id)).map((c) => c.id);
      expect(unmoved.length).toBeGreaterThan(50);
      expect(listed).toEqual(expect.arrayContaining(unmoved));
      const known = new Set(cards.map((c) => c.id));
      for (const id of listed) expect(known.has(id)).toBe(true);
    }
  });
});
