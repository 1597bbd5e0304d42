import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Card } from '@lanes/contracts';
import { CardStore, CasStore, EventLog, FleetStore, createRedis, keys, type CardWriter } from '@lanes/queue';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** Fixed clock: history timestamps and blocked-set scores are exact. */
const T0 = Date.UTC(2025, 0, 2, 3, 4, 5);

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

describe('CardStore on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let events: EventLog;
  let nowMs = T0;
  let store: CardStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    events = new EventLog(redis);
    store = new CardStore({ redis, now: () => nowMs });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (over: Partial<Card> = {}): Card => ({ id: uid('card'), lane: uid('lane'), title: 'Fix flaky test', priority: 0, ...over });
  /** Gives `card` a BullMQ-style job lock held by `token`, as a worker taking its job would. */
  const runAs = async (card: Card, token: string): Promise<CardWriter> => {
    await redis.set(keys.jobLock(card.lane, card.id), token);
    return { kind: 'run', token };
  };
  const board: CardWriter = { kind: 'board' };
  const eventsOf = async (cardId: string) => (await events.recent(1_000)).filter((e) => e.cardId === cardId);

  it('create is idempotent: the second create returns created:false and the same record', async () => {
    const card = newCard({ prompt: 'p', metadata: { board: 'k', n: 1 } });
    const first = await store.create(card);
    expect(first.created).toBe(true);
    expect(first.record).toMatchObject({ ...card, state: 'queued', attempts: 0, infraRetries: 0 });
    expect(first.record.history).toEqual([{ at: new Date(T0).toISOString(), state: 'queued', attempt: 0, message: 'enqueued' }]);

    nowMs = T0 + 1_000;
    const second = await store.create({ ...card, title: 'a different title' });
    expect(second.created).toBe(false);
    expect(second.record).toEqual(first.record);
    expect((await eventsOf(card.id)).map((e) => e.type)).toEqual(['card.queued']);
    nowMs = T0;
  });

  it('get and lane of an unknown id are undefined; lane reads an existing card’s lane', async () => {
    expect(await store.get(uid('nope'))).toBeUndefined();
    expect(await store.lane(uid('nope'))).toBeUndefined();
    const card = newCard();
    await store.create(card);
    expect(await store.lane(card.id)).toBe(card.lane);
  });

  it('transition appends history in order with attempt, sandboxId, blockedReason and observedExitCode (0 kept, "unknown" kept)', async () => {
    const card = newCard();
    await store.create(card);
    nowMs = T0 + 1;
    const r1 = await runAs(card, 'token-1');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-1', slot: 's0' }, r1);
    nowMs = T0 + 2;
    await store.transition(
      card,
      {
        to: 'blocked',
        attempt: 1,
        sandboxId: 'sb-1',
        blockedReason: 'sandbox-dead',
        verdict: 'sandbox-dead',
        observedExitCode: 0,
        message: 'sandbox exited(0)',
        retryAt: T0 + 60_000,
        infraRetries: 1,
      },
      r1,
    );
    let record = (await store.get(card.id))!;
    expect(record.observedExitCode).toBe(0);
    expect(record.blockedReason).toBe('sandbox-dead');
    expect(record.blockedMessage).toBe('sandbox exited(0)');
    expect(record.infraRetries).toBe(1);

    nowMs = T0 + 3;
    const r2 = await runAs(card, 'token-2');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-2' }, r2);
    nowMs = T0 + 4;
    await store.transition(card, { to: 'blocked', attempt: 1, sandboxId: 'sb-2', blockedReason: 'sandbox-dead', observedExitCode: 'unknown', retryAt: T0 + 30_000 }, r2);
    nowMs = T0 + 5;
    const r3 = await runAs(card, 'token-3');
    await store.transition(card, { to: 'running', attempt: 2, sandboxId: 'sb-3' }, r3);
    nowMs = T0 + 6;
    await store.transition(card, { to: 'done', attempt: 2, sandboxId: 'sb-3', exitCode: 0, result: { pr: 'https://x/pr/1' } }, r3);

    record = (await store.get(card.id))!;
    const at = (n: number) => new Date(T0 + n).toISOString();
    expect(record.history).toEqual([
      { at: at(0), state: 'queued', attempt: 0, message: 'enqueued' },
      { at: at(1), state: 'running', attempt: 1, sandboxId: 'sb-1' },
      {
        at: at(2),
        state: 'blocked',
        attempt: 1,
        sandboxId: 'sb-1',
        blockedReason: 'sandbox-dead',
        verdict: 'sandbox-dead',
        observedExitCode: 0,
        message: 'sandbox exited(0)',
        retryAt: new Date(T0 + 60_000).toISOString(),
      },
      { at: at(3), state: 'running', attempt: 1, sandboxId: 'sb-2' },
      { at: at(4), state: 'blocked', attempt: 1, sandboxId: 'sb-2', blockedReason: 'sandbox-dead', observedExitCode: 'unknown', retryAt: new Date(T0 + 30_000).toISOString() },
      { at: at(5), state: 'running', attempt: 2, sandboxId: 'sb-3' },
      { at: at(6), state: 'done', attempt: 2, sandboxId: 'sb-3', verdict: 'ok', exitCode: 0 },
    ]);
    expect(record).toMatchObject({ state: 'done', attempts: 2, sandboxId: 'sb-3', observedExitCode: 'unknown', result: { pr: 'https://x/pr/1' }, updatedAt: at(6) });
    expect(record.blockedReason).toBeUndefined();
    expect(record.blockedMessage).toBeUndefined();
    nowMs = T0;
  });

  it('keeps the lane blocked set: added on blocked, removed on any other state, and blockedReason cleared', async () => {
    const lane = uid('lane');
    const a = newCard({ lane });
    const b = newCard({ lane });
    await store.create(a);
    await store.create(b);
    nowMs = T0 + 10;
    await store.transition(a, { to: 'blocked', attempt: 1, blockedReason: 'needs-human', message: 'which branch?', retryAt: T0 + 99_000 }, await runAs(a, 'ta'));
    nowMs = T0 + 20;
    const rb1 = await runAs(b, 'tb');
    await store.transition(b, { to: 'blocked', attempt: 1, blockedReason: 'provider-outage', retryAt: T0 + 99_000 }, rb1);
    expect(await store.blocked(lane)).toEqual([
      { id: a.id, blockedReason: 'needs-human', since: T0 + 10 },
      { id: b.id, blockedReason: 'provider-outage', since: T0 + 20 },
    ]);
    expect(await redis.zscore(keys.blocked(lane), a.id)).toBe(String(T0 + 10));

    await store.transition(a, { to: 'queued', attempt: 1, event: 'card.unblocked', message: 'unblocked' }, board);
    expect(await store.blocked(lane)).toEqual([{ id: b.id, blockedReason: 'provider-outage', since: T0 + 20 }]);
    expect(await redis.zscore(keys.blocked(lane), a.id)).toBeNull();
    const ra = (await store.get(a.id))!;
    expect(ra.state).toBe('queued');
    expect(ra.blockedReason).toBeUndefined();
    expect(ra.blockedMessage).toBeUndefined();
    expect(await redis.hexists(keys.card(a.id), 'blockedReason')).toBe(0);

    await store.transition(b, { to: 'running', attempt: 1, sandboxId: 'sb-b' }, rb1);
    expect(await store.blocked(lane)).toEqual([]);
    await store.transition(b, { to: 'failed', attempt: 1, failedReason: 'infra', message: 'out of infra retries' }, rb1);
    expect(await store.blocked(lane)).toEqual([]);
    expect(await redis.exists(keys.blocked(lane))).toBe(0);
    const rb = (await store.get(b.id))!;
    expect(rb).toMatchObject({ state: 'failed', failedReason: 'infra' });
    expect(rb.blockedReason).toBeUndefined();
    nowMs = T0;
  });

  it('emits one event per transition into the stream, typed card.<state> unless overridden', async () => {
    const card = newCard();
    await store.create(card);
    const r1 = await runAs(card, 'e1');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-e', slot: 'w1/0' }, r1);
    await store.transition(card, { to: 'blocked', attempt: 1, sandboxId: 'sb-e', blockedReason: 'sandbox-dead', observedExitCode: 0, verdict: 'sandbox-dead', retryAt: T0 }, r1);
    await store.transition(card, { to: 'queued', attempt: 1, event: 'card.redriven', message: 'replacement live' }, board);
    const r2 = await runAs(card, 'e2');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb-f' }, r2);
    await store.transition(card, { to: 'failed', attempt: 1, failedReason: 'command-failed', exitCode: 3, message: 'agent exited 3' }, r2);

    const seen = await eventsOf(card.id);
    expect(seen.map((e) => e.type)).toEqual(['card.queued', 'card.running', 'card.blocked', 'card.redriven', 'card.running', 'card.failed']);
    for (const e of seen) {
      expect(e.lane).toBe(card.lane);
      expect(e.id).toMatch(/^\d+-\d+$/);
    }
    expect(seen[1]).toMatchObject({ slot: 'w1/0', sandboxId: 'sb-e' });
    expect(seen[2]!.data).toEqual({ blockedReason: 'sandbox-dead', verdict: 'sandbox-dead', observedExitCode: 0 });
    expect(seen[3]!.data).toEqual({ message: 'replacement live' });
    expect(seen[5]!.data).toEqual({ failedReason: 'command-failed', message: 'agent exited 3' });
    // The stream ids increase in the order the transitions were made.
    const ids = seen.map((e) => e.id.split('-').map(Number) as [number, number]);
    for (let i = 1; i < ids.length; i++) {
      const [prev, next] = [ids[i - 1]!, ids[i]!];
      expect(next[0] > prev[0] || (next[0] === prev[0] && next[1] > prev[1])).toBe(true);
    }
  });

  it('the callback stream gets only the events a board hears of, and only for cards with a callbackUrl', async () => {
    const callbacksOf = async (cardId: string) =>
      ((await redis.xrange(keys.callbacks(), '-', '+')) as Array<[string, string[]]>)
        .map(([, fields]) => JSON.parse(fields[1]!) as { type: string; cardId: string })
        .filter((e) => e.cardId === cardId)
        .map((e) => e.type);
    const heard = newCard({ callbackUrl: 'https://board.example/hook' });
    const silent = newCard();
    // Written before the `callback` field existed: the script asks the card JSON instead.
    const legacy = newCard({ callbackUrl: 'https://board.example/hook' });
    for (const card of [heard, silent, legacy]) await store.create(card);
    await redis.hdel(keys.card(legacy.id), 'callback');
    for (const card of [heard, silent, legacy]) {
      const r = await runAs(card, `cb-${card.id}`);
      await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, r);
      await store.transition(card, { to: 'blocked', attempt: 1, sandboxId: 'sb', blockedReason: 'needs-human', retryAt: T0 }, r);
      await store.transition(card, { to: 'queued', attempt: 1, event: 'card.unblocked' }, board);
      const r2 = await runAs(card, `cb2-${card.id}`);
      await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, r2);
      await store.transition(card, { to: 'done', attempt: 1 }, r2);
    }
    expect(await callbacksOf(heard.id)).toEqual(['card.blocked', 'card.done']);
    expect(await callbacksOf(legacy.id)).toEqual(['card.blocked', 'card.done']);
    expect(await callbacksOf(silent.id)).toEqual([]);
    // The event stream itself still has every event of every card.
    expect((await eventsOf(silent.id)).map((e) => e.type)).toEqual(['card.queued', 'card.running', 'card.blocked', 'card.unblocked', 'card.running', 'card.done']);
  });

  it('createMany writes new records in one script call and answers repeats with their state and lane, writing nothing', async () => {
    const a = newCard();
    const b = newCard();
    await store.create(b);
    const r = await runAs(b, 'cm');
    await store.transition(b, { to: 'running', attempt: 1, sandboxId: 'sb' }, r);
    const out = await store.createMany([a, { ...b, lane: 'elsewhere', title: 'changed' }]);
    expect(out).toEqual([
      { created: true, state: 'queued', lane: a.lane },
      { created: false, state: 'running', lane: b.lane },
    ]);
    expect((await store.get(a.id))!.history.map((h) => h.state)).toEqual(['queued']);
    expect(await store.get(b.id)).toMatchObject({ title: b.title, lane: b.lane, state: 'running' });
    expect((await eventsOf(b.id)).map((e) => e.type)).toEqual(['card.queued', 'card.running']);
  });

  it('createMany given one id twice makes one record and answers the second with the lane it was made on', async () => {
    const a = newCard();
    const out = await store.createMany([a, { ...a, lane: 'elsewhere', title: 'changed' }]);
    expect(out).toEqual([
      { created: true, state: 'queued', lane: a.lane },
      { created: false, state: 'queued', lane: a.lane },
    ]);
    expect(await store.get(a.id)).toMatchObject({ title: a.title, lane: a.lane, state: 'queued' });
    expect((await store.get(a.id))!.history).toHaveLength(1);
  });

  it('a failed card stays failed: a later move out of it is refused and writes nothing', async () => {
    const card = newCard();
    await store.create(card);
    const r = await runAs(card, 'f1');
    await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, r);
    await store.transition(card, { to: 'failed', attempt: 1, failedReason: 'command-failed' }, r);
    expect(await store.transition(card, { to: 'queued', attempt: 1 }, board)).toEqual({ ok: false, refusal: 'illegal', state: 'failed' });
    const record = (await store.get(card.id))!;
    expect(record).toMatchObject({ state: 'failed', failedReason: 'command-failed' });
    expect(record.history.map((h) => h.state)).toEqual(['queued', 'running', 'failed']);
  });

  it('requestCancel keeps the request on a card that may run and publishes it; a finished or unknown card gets nothing', async () => {
    const listener = redis.duplicate();
    const heard: string[] = [];
    listener.on('message', (_channel: string, id: string) => heard.push(id));
    await listener.subscribe(keys.cancelChannel());
    try {
      const queued = newCard();
      const running = newCard();
      const done = newCard();
      for (const c of [queued, running, done]) await store.create(c);
      const r = await runAs(running, 'c1');
      await store.transition(running, { to: 'running', attempt: 1, sandboxId: 'sb' }, r);
      const d = await runAs(done, 'c2');
      await store.transition(done, { to: 'running', attempt: 1, sandboxId: 'sb' }, d);
      await store.transition(done, { to: 'done', attempt: 1, result: null }, d);

      expect(await store.requestCancel(running.id)).toBe('running');
      expect(await store.requestCancel(queued.id)).toBe('queued');
      expect(await store.requestCancel(done.id)).toBe('done');
      const unknown = uid('card');
      expect(await store.requestCancel(unknown)).toBeUndefined();
      // No key is made for a card that does not exist.
      expect(await redis.exists(keys.card(unknown))).toBe(0);

      expect(await store.cancelRequested([done.id, running.id, unknown, queued.id])).toEqual([running.id, queued.id]);
      expect(await store.cancelRequested([])).toEqual([]);
      // The request rides on the record and survives moves: a retry's next run still finds it.
      await store.transition(running, { to: 'queued', attempt: 1, message: 'retry' }, r);
      expect(await store.cancelRequested([running.id])).toEqual([running.id]);
      expect((await store.get(running.id))!.state).toBe('queued');
      // The next move to running says so, so that run starts nothing.
      const again = await runAs(queued, 'c3');
      expect(await store.transition(queued, { to: 'running', attempt: 1, sandboxId: 'sb' }, again)).toMatchObject({ ok: true, state: 'running', cancelRequested: true });
      await waitFor('both cancels heard', () => heard.length >= 2);
      expect(heard).toEqual([running.id, queued.id]);
    } finally {
      listener.disconnect();
    }
  });
});

describe('FleetStore on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let fleet: FleetStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    fleet = new FleetStore(redis);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  it('heartbeats: latest beat per worker, forgotten workers drop out', async () => {
    const w1 = uid('w');
    const w2 = uid('w');
    await fleet.beat(w1, T0);
    await fleet.beat(w2, T0 + 5);
    await fleet.beat(w1, T0 + 10);
    let beats = await fleet.beats();
    expect(beats[w1]).toBe(T0 + 10);
    expect(beats[w2]).toBe(T0 + 5);
    await fleet.forgetWorker(w1);
    beats = await fleet.beats();
    expect(beats[w1]).toBeUndefined();
    expect(beats[w2]).toBe(T0 + 5);
  });

  it('lanes: registered names map to their provider', async () => {
    const a = uid('lane');
    const b = uid('lane');
    await fleet.registerLanes([]);
    await fleet.registerLanes([
      { name: a, provider: 'local' },
      { name: b, provider: 'modal' },
    ]);
    const lanes = await fleet.lanes();
    expect(lanes[a]).toBe('local');
    expect(lanes[b]).toBe('modal');
  });

  it('slots: put overwrites per worker/slot, sorted, removeSlot drops one, removeSlots only that worker', async () => {
    const lane = uid('lane');
    const sandbox = { id: 'lsb-1', state: 'live' as const, pid: 4242 };
    await fleet.putSlot(lane, { worker: 'wb', slot: '0', sandbox });
    await fleet.putSlot(lane, { worker: 'wa', slot: '1' });
    await fleet.putSlot(lane, { worker: 'wa', slot: '0', cardId: 'c1' });
    await fleet.putSlot(lane, { worker: 'wa', slot: '0', cardId: 'c2', heartbeatAt: new Date(T0).toISOString() });
    expect(await fleet.slots(lane)).toEqual([
      { worker: 'wa', slot: '0', cardId: 'c2', heartbeatAt: new Date(T0).toISOString() },
      { worker: 'wa', slot: '1' },
      { worker: 'wb', slot: '0', sandbox },
    ]);
    await fleet.removeSlot(lane, 'wa', '1');
    expect((await fleet.slots(lane)).map((s) => `${s.worker}/${s.slot}`)).toEqual(['wa/0', 'wb/0']);
    await fleet.removeSlots(lane, 'wa');
    expect(await fleet.slots(lane)).toEqual([{ worker: 'wb', slot: '0', sandbox }]);
    await fleet.removeSlots(lane, 'nobody');
    expect(await fleet.slots(uid('empty'))).toEqual([]);
  });

  it('breaker: closed by default, then the shared snapshot as operators read it', async () => {
    const lane = uid('lane');
    expect(await fleet.breaker(lane)).toEqual({ state: 'closed', failures: 0 });
    const cas = new CasStore(redis.duplicate());
    try {
      await cas.update(keys.breaker(lane), () => ({ next: { state: 'open', failures: [T0, T0 + 1, T0 + 2], retryAt: T0 + 10_000, probeInFlight: false }, result: null }));
      expect(await fleet.breaker(lane)).toEqual({ state: 'open', failures: 3, retryAt: new Date(T0 + 10_000).toISOString() });
      await cas.update(keys.breaker(lane), () => ({ next: { state: 'closed', failures: [], probeInFlight: false }, result: null }));
      expect(await fleet.breaker(lane)).toEqual({ state: 'closed', failures: 0 });
    } finally {
      await cas.close();
    }
  });

  it('CasStore: concurrent read-modify-writes from two processes lose no update', async () => {
    const key = uid('counter');
    const a = new CasStore(redis.duplicate());
    const b = new CasStore(redis.duplicate());
    try {
      const bump = (store: CasStore) => store.update<number, number>(key, (n) => ({ next: (n ?? 0) + 1, result: (n ?? 0) + 1 }));
      await Promise.all(Array.from({ length: 40 }, (_, i) => bump(i % 2 ? a : b)));
      expect(await a.read<number>(key)).toBe(40);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('CasStore: a decision that changes nothing is answered from one GET, with no WATCH or transaction; a change still goes through one', async () => {
    const key = uid('snapshot');
    const cas = new CasStore(redis.duplicate());
    /** Calls of a command so far on this server (INFO commandstats). */
    const calls = async (command: string) =>
      Number(/calls=(\d+)/.exec((await redis.info('commandstats')).split('\n').find((l) => l.startsWith(`cmdstat_${command}:`)) ?? '')?.[1] ?? 0);
    const counts = async () => ({ watch: await calls('watch'), exec: await calls('exec') });
    try {
      // Absent: the first write makes it, through the transaction.
      const first = await counts();
      await cas.update<{ state: string; n: number; note?: string }, string>(key, () => ({ next: { state: 'closed', n: 0 }, result: 'made' }));
      expect(await counts()).toEqual({ watch: first.watch + 1, exec: first.exec + 1 });
      // The same value again, in another key order and with an undefined field (JSON drops it): nothing to write.
      const before = await counts();
      const results = await Promise.all(
        Array.from({ length: 8 }, () =>
          cas.update<{ state: string; n: number; note?: string }, string>(key, (s) => ({ next: { n: s?.n ?? 0, state: 'closed', note: undefined }, result: 'same' })),
        ),
      );
      expect(results).toEqual(Array(8).fill('same'));
      expect(await counts()).toEqual(before);
      // A change is written through the transaction, and read back.
      await cas.update<{ state: string; n: number }, string>(key, (s) => ({ next: { state: 'open', n: (s?.n ?? 0) + 1 }, result: 'changed' }));
      expect(await counts()).toEqual({ watch: before.watch + 1, exec: before.exec + 1 });
      expect(await cas.read(key)).toEqual({ state: 'open', n: 1 });
    } finally {
      await cas.close();
    }
  });

  it('health: undefined until put, then the last put', async () => {
    const lane = uid('lane');
    expect(await fleet.health(lane)).toBeUndefined();
    const h = { status: 'outage' as const, reason: 'breaker open', at: new Date(T0).toISOString() };
    await fleet.putHealth(lane, h);
    expect(await fleet.health(lane)).toEqual(h);
  });
});
