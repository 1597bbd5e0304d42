import { randomBytes } from 'node:crypto';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { isTerminalCardState, type Card } from '@lanes/contracts';
import { CardStore, EventLog, createRedis, keys, type CardMove, type CardWriter } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

/** The transition script against a real redis-server: what it refuses, and that a refusal writes nothing. */
describe('card transition script on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let events: EventLog;
  let store: CardStore;
  let logs: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    events = new EventLog(redis);
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        for (const line of chunk.toString().split('\n').filter(Boolean)) logs.push(JSON.parse(line) as Record<string, unknown>);
        done();
      },
    });
    store = new CardStore({ redis, now: Date.now, log: pino({ level: 'info' }, sink) });
  });
  beforeEach(() => {
    logs = [];
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (): Card => ({ id: uid('card'), lane: uid('lane'), title: 't', priority: 0 });
  /** BullMQ's lock of the card's job, held by `token`: what a worker taking the job holds. */
  const lockAs = async (card: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(card.lane, card.id), token);
    return { kind: 'run', token };
  };
  const board: CardWriter = { kind: 'board' };
  const running = (sandboxId: string): CardMove => ({ to: 'running', attempt: 1, sandboxId, slot: 'w-0' });
  const done = (sandboxId: string): CardMove => ({ to: 'done', attempt: 1, sandboxId, slot: 'w-0', exitCode: 0 });
  const snapshot = async (card: Card) => ({
    hash: await redis.hgetall(keys.card(card.id)),
    history: await redis.lrange(keys.history(card.id), 0, -1),
    events: (await events.recent(10_000)).filter((e) => e.cardId === card.id).length,
    blocked: await redis.zscore(keys.blocked(card.lane), card.id),
  });
  const staleLogs = () => logs.filter((l) => l.event === 'card.stale-write');

  it.each<[string, CardMove]>([
    ['queued → done', { to: 'done', attempt: 1 }],
    ['queued → failed', { to: 'failed', attempt: 1, failedReason: 'infra' }],
  ])('an illegal move (%s) is refused and writes nothing', async (_name, move) => {
    const card = newCard();
    await store.create(card);
    const writer = await lockAs(card, 'tok');
    const before = await snapshot(card);
    expect(await store.transition(card, move, writer)).toEqual({ ok: false, refusal: 'illegal', state: 'queued' });
    expect(await snapshot(card)).toEqual(before);
    expect(logs.map((l) => l.event)).toEqual(['card.illegal-transition']);
  });

  it('a conditional move (only from blocked) refused from another legal source writes nothing and logs no illegal write; from an illegal one it still does', async () => {
    const card = newCard();
    await store.create(card);
    const before = await snapshot(card);
    const redrive: CardMove = { to: 'queued', attempt: 1, event: 'card.redriven' };
    // queued → queued is legal, so unconditioned it would write; only from blocked, it is a race lost.
    expect(await store.transition(card, redrive, board, { from: ['blocked'] })).toEqual({ ok: false, refusal: 'illegal', state: 'queued' });
    expect(await snapshot(card)).toEqual(before);
    expect(logs).toEqual([]);
    // A move illegal from where the card is stays an illegal write, conditioned or not.
    expect(await store.transition(card, { to: 'done', attempt: 1 }, await lockAs(card, 'tok'), { from: ['running'] })).toEqual({ ok: false, refusal: 'illegal', state: 'queued' });
    expect(logs.map((l) => l.event)).toEqual(['card.illegal-transition']);
    // From the state it names, it moves as any other.
    await store.transition(card, { to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: Date.now() }, board);
    expect(await store.transition(card, redrive, board, { from: ['blocked'] })).toMatchObject({ ok: true, state: 'queued' });
  });

  it.each(['done', 'failed', 'cancelled'] as const)('no move but a retry (CardStore.retry) takes a card out of terminal %s', async (terminal) => {
    const card = newCard();
    await store.create(card);
    const writer = await lockAs(card, 'tok');
    await store.transition(card, running('sb'), writer);
    const end: CardMove = terminal === 'done' ? done('sb') : terminal === 'failed' ? { to: 'failed', attempt: 1, failedReason: 'command-failed' } : { to: 'cancelled', attempt: 1 };
    expect((await store.transition(card, end, writer)).ok).toBe(true);
    const before = await snapshot(card);
    // Writers that hold the job's lock (or need none): the move itself is what is refused.
    const attempts: Array<[CardMove, string | undefined]> = [
      [running('sb2'), 'tok2'],
      [{ to: 'queued', attempt: 1, event: 'card.redriven' }, undefined],
      [{ to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: Date.now() }, 'tok'],
      [done('sb'), 'tok'],
      [{ to: 'cancelled', attempt: 1 }, undefined],
    ];
    for (const [move, token] of attempts) {
      const w = token === undefined ? board : await lockAs(card, token);
      expect(await store.transition(card, move, w)).toEqual({ ok: false, refusal: 'illegal', state: terminal });
    }
    await redis.del(keys.jobLock(card.lane, card.id));
    expect(await snapshot(card)).toEqual(before);
  });

  it("a stale run's done is refused, logged as card.stale-write, and never recorded", async () => {
    const card = newCard();
    await store.create(card);
    const first = await lockAs(card, 'run-a');
    expect(await store.transition(card, running('sb-a'), first)).toEqual({
      ok: true,
      state: 'running',
      takeover: false,
      crashSuspects: 0,
      infraRetries: 0,
      cancelRequested: false,
      reclaimed: false,
    });
    // Run a lost its lock; BullMQ gave the job to run b, which took the card over.
    const second = await lockAs(card, 'run-b');
    expect(await store.transition(card, running('sb-b'), second)).toEqual({
      ok: true,
      state: 'running',
      takeover: true,
      crashSuspects: 1,
      infraRetries: 0,
      cancelRequested: false,
      reclaimed: false,
    });

    const before = await snapshot(card);
    expect(await store.transition(card, done('sb-a'), first)).toEqual({ ok: false, refusal: 'stale', state: 'running' });
    expect(await snapshot(card)).toEqual(before);
    expect(staleLogs()).toEqual([expect.objectContaining({ cardId: card.id, lane: card.lane, slot: 'w-0', sandboxId: 'sb-a', state: 'running', to: 'done', writer: 'run' })]);

    expect((await store.transition(card, done('sb-b'), second)).ok).toBe(true);
    const record = (await store.get(card.id))!;
    expect(record.history.map((h) => h.state)).toEqual(['queued', 'running', 'running', 'done']);
    expect(record.sandboxId).toBe('sb-b');
  });

  it("a cut-off run's late done after another run's done is a stale write, not merely an illegal one", async () => {
    const card = newCard();
    await store.create(card);
    const first = await lockAs(card, 'run-a');
    await store.transition(card, running('sb-a'), first);
    const second = await lockAs(card, 'run-b');
    await store.transition(card, running('sb-b'), second);
    await store.transition(card, done('sb-b'), second);
    await redis.del(keys.jobLock(card.lane, card.id));
    const before = await snapshot(card);
    expect(await store.transition(card, done('sb-a'), first)).toEqual({ ok: false, refusal: 'stale', state: 'done' });
    expect(await snapshot(card)).toEqual(before);
    expect(staleLogs()).toEqual([expect.objectContaining({ cardId: card.id, sandboxId: 'sb-a', state: 'done', to: 'done' })]);
  });

  it('a run whose lock expired cannot write, even when no other run took the card yet', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await lockAs(card, 'run-a');
    await store.transition(card, running('sb-a'), writer);
    await redis.del(keys.jobLock(card.lane, card.id));
    for (const move of [done('sb-a'), { to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: Date.now(), sandboxId: 'sb-a', slot: 'w-0' } as const]) {
      expect(await store.transition(card, move, writer)).toEqual({ ok: false, refusal: 'stale', state: 'running' });
    }
    expect(staleLogs()).toHaveLength(2);
    expect((await store.get(card.id))!.state).toBe('running');
  });

  it('a run holding the lock but not the card (its move into running never landed) cannot end it', async () => {
    const card = newCard();
    await store.create(card);
    await store.transition(card, running('sb-a'), await lockAs(card, 'run-a'));
    const b = await lockAs(card, 'run-b');
    expect(await store.transition(card, done('sb-b'), b)).toEqual({ ok: false, refusal: 'stale', state: 'running' });
  });

  it('the board cannot move a card out of running; it can cancel one only while the run it read is the card’s run', async () => {
    const card = newCard();
    await store.create(card);
    await store.transition(card, running('sb-a'), await lockAs(card, 'run-a'));
    const cancel: CardMove = { to: 'cancelled', attempt: 1 };
    expect(await store.transition(card, { to: 'queued', attempt: 1, event: 'card.redriven' }, board)).toEqual({ ok: false, refusal: 'stale', state: 'running' });
    expect(await store.transition(card, cancel, board)).toEqual({ ok: false, refusal: 'stale', state: 'running' });
    expect(await store.runToken(card.id)).toBe('run-a');
    await store.transition(card, running('sb-b'), await lockAs(card, 'run-b'));
    expect(await store.transition(card, cancel, { kind: 'board-if-run', token: 'run-a' })).toEqual({ ok: false, refusal: 'stale', state: 'running' });
    expect((await store.transition(card, cancel, { kind: 'board-if-run', token: 'run-b' })).ok).toBe(true);
  });

  it('concurrent endings of one run: exactly one lands, and the history holds one terminal entry', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await lockAs(card, 'run-a');
    await store.transition(card, running('sb'), writer);
    const moves: CardMove[] = Array.from(
      { length: 24 },
      (_, i) => [done('sb'), { to: 'failed', attempt: 1, failedReason: 'command-failed' } as const, { to: 'cancelled', attempt: 1 } as const][i % 3]!,
    );
    const results = await Promise.all(moves.map((m) => store.transition(card, m, writer)));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    const record = (await store.get(card.id))!;
    expect(record.history).toHaveLength(3);
    expect(record.history.filter((h) => isTerminalCardState(h.state))).toHaveLength(1);
    expect((await events.recent(10_000)).filter((e) => e.cardId === card.id)).toHaveLength(3);
  });

  it('concurrent takeovers by two runs: only the lock holder gets the card', async () => {
    const card = newCard();
    await store.create(card);
    await lockAs(card, 'run-b');
    const results = await Promise.all([
      store.transition(card, running('sb-a'), { kind: 'run', token: 'run-a' }),
      store.transition(card, running('sb-b'), { kind: 'run', token: 'run-b' }),
    ]);
    expect(results.map((r) => r.ok)).toEqual([false, true]);
    expect(await store.runToken(card.id)).toBe('run-b');
  });

  it('concurrent creates of one id: one creates, the rest find it; one history entry and one event', async () => {
    const card = newCard();
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.create({ ...card, title: `t${i}` })));
    expect(results.filter((r) => r.created)).toHaveLength(1);
    const record = (await store.get(card.id))!;
    expect(record.history).toHaveLength(1);
    for (const r of results) expect(r.record).toEqual(record);
    expect((await events.recent(10_000)).filter((e) => e.cardId === card.id).map((e) => e.type)).toEqual(['card.queued']);
  });

  it('a takeover counts the replaced run as a crash suspect unless its worker said it fenced itself', async () => {
    const card = newCard();
    await store.create(card);
    await store.transition(card, running('sb-a'), await lockAs(card, 'run-a'));
    // Fenced before the takeover: the takeover costs nothing.
    await store.markFenced(card.id, 'run-a');
    expect(await store.transition(card, running('sb-b'), await lockAs(card, 'run-b'))).toMatchObject({ takeover: true, crashSuspects: 0 });
    // No word from run b: it counts.
    expect(await store.transition(card, running('sb-c'), await lockAs(card, 'run-c'))).toMatchObject({ takeover: true, crashSuspects: 1 });
    // Run b says so late: the count goes back down.
    await store.markFenced(card.id, 'run-b');
    expect(await store.transition(card, running('sb-d'), await lockAs(card, 'run-d'))).toMatchObject({ takeover: true, crashSuspects: 1 });
    expect(await redis.smembers(keys.crashSuspects(card.id))).toEqual(['run-c']);
  });
});
