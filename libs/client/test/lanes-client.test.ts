import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT, freePort, type Stack } from '@lanes/cli';
import { LanesApiError, LanesClient, LanesUnreachableError, type EventGap, type StreamedEvent } from '@lanes/client';
import { keys } from '@lanes/queue';
import { Redis } from 'ioredis';
import { startApiOnly, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../../../test/harness/index.js';

const TOKEN = 'client-test-token';

describe('@lanes/client against a real stack', () => {
  let redis: TestRedis;
  let t: TestStack;
  let client: LanesClient;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'sdk', slots: 1, agent: [process.execPath, DEMO_AGENT], attempts: 1 }], { tokens: [TOKEN] });
    client = new LanesClient({ url: t.stack.url!, token: TOKEN });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('enqueues one card, says whether it was new, and gets it back', async () => {
    expect(await client.enqueue({ id: 'sdk-1', lane: 'sdk', title: 'one' })).toEqual({ id: 'sdk-1', state: 'queued', created: true });
    expect(await client.enqueue({ id: 'sdk-1', lane: 'sdk', title: 'one' })).toMatchObject({ id: 'sdk-1', created: false });
    await waitFor('sdk-1 done', async () => (await client.get('sdk-1')).state === 'done');
    const card = await client.get('sdk-1');
    expect(card).toMatchObject({ id: 'sdk-1', lane: 'sdk', title: 'one', state: 'done', result: { branch: 'lanes/sdk-1' } });
    expect(card.history.map((h) => h.state)).toContain('running');
  });

  it('enqueues many, all or nothing', async () => {
    const cards = await client.enqueueMany([
      { id: 'sdk-m1', lane: 'sdk', title: 'a' },
      { id: 'sdk-m2', lane: 'sdk', title: 'b' },
    ]);
    expect(cards.map((c) => [c.id, c.created])).toEqual([
      ['sdk-m1', true],
      ['sdk-m2', true],
    ]);
    const err = await client
      .enqueueMany([
        { id: 'sdk-m3', lane: 'sdk', title: 'c' },
        { lane: 'nope', title: 'd' },
      ])
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(LanesApiError);
    expect(err).toMatchObject({ status: 400, code: 'CARD_INVALID', retry: 'permanent', issues: [{ path: 'cards.1.lane' }] });
    await expect(client.get('sdk-m3')).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('is refused a callback to this machine when LANES_CALLBACK_ALLOW is unset, naming the field', async () => {
    // The URL parser spells 2130706433 and 0x7f.1 as 127.0.0.1 before the check sees them.
    for (const callbackUrl of [
      'http://127.0.0.1:9/hook',
      'http://localhost:9/hook',
      'http://[::1]:9/hook',
      'http://2130706433:9/hook',
      'http://0x7f.1:9/hook',
      'http://[::ffff:127.0.0.1]:9/hook',
    ]) {
      const err = await client.enqueue({ id: 'sdk-cb', lane: 'sdk', title: 'x', callbackUrl }).catch((e: unknown) => e);
      expect(err, callbackUrl).toMatchObject({ status: 400, code: 'CARD_INVALID', issues: [{ path: 'callbackUrl' }] });
    }
  });

  it('unblocks and cancels, with the API codes on refusal', async () => {
    await client.enqueue({ id: 'sdk-help', lane: 'sdk', title: 'help', metadata: { needsHuman: 'which base?' } });
    await waitFor('sdk-help blocked', async () => (await client.get('sdk-help')).state === 'blocked');
    expect(await client.unblock('sdk-help', 'main')).toMatchObject({ id: 'sdk-help' });
    // The demo agent asks again on every run, so the card blocks a second time, carrying the note.
    await waitFor('sdk-help blocked again', async () => (await client.get('sdk-help')).history.filter((h) => h.state === 'blocked').length === 2);
    expect((await client.get('sdk-help')).history.some((h) => h.message === 'unblocked: main')).toBe(true);
    expect(await client.cancel('sdk-help')).toMatchObject({ id: 'sdk-help' });
    await waitFor('sdk-help cancelled', async () => (await client.get('sdk-help')).state === 'cancelled');
    const refused = await client.unblock('sdk-help').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LanesApiError);
    expect(refused).toMatchObject({ status: 409, retry: 'permanent' });
    expect((refused as LanesApiError).code).toMatch(/^[A-Z_]+$/);
    await expect(client.cancel('no-such-card')).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });

  it('lists cards a page at a time and through its iterators, each card once; retry is refused for a done card with CARD_STATE', async () => {
    await client.enqueueMany(Array.from({ length: 5 }, (_, i) => ({ id: `sdk-l${i}`, lane: 'sdk', title: `l${i}` })));
    for (let i = 0; i < 5; i++) await waitFor(`sdk-l${i} done`, async () => (await client.get(`sdk-l${i}`)).state === 'done');
    const first = await client.list({ lane: 'sdk', state: 'done', limit: 2 });
    expect(first.cards).toHaveLength(2);
    expect(first.nextCursor).toBeDefined();
    const pages = [];
    for await (const page of client.pages({ lane: 'sdk', state: 'done', limit: 2 })) pages.push(page);
    expect(pages.length).toBeGreaterThanOrEqual(3);
    const ids: string[] = [];
    for await (const card of client.cards({ lane: 'sdk', state: 'done', limit: 2 })) ids.push(card.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(expect.arrayContaining(['sdk-l0', 'sdk-l1', 'sdk-l2', 'sdk-l3', 'sdk-l4']));
    expect(ids).toEqual(pages.flatMap((p) => p.cards.map((c) => c.id)));
    await expect(client.list({ lane: 'sdk', limit: 500 })).rejects.toMatchObject({ status: 400, code: 'QUERY_INVALID', issues: [{ path: 'limit' }] });
    await expect(client.list({ lane: 'nope' })).rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
    await expect(client.retry('sdk-l0', 'again')).rejects.toMatchObject({ status: 409, code: 'CARD_STATE' });
  });

  it('lists lanes', async () => {
    const lanes = await client.lanes();
    expect(lanes.map((l) => l.name)).toEqual(['sdk']);
    expect(lanes[0]!.slots).toHaveLength(1);
  });

  it('raises typed errors for a bad token and for an API that is not there', async () => {
    await expect(new LanesClient({ url: t.stack.url!, token: 'wrong' }).lanes()).rejects.toMatchObject({ status: 401, code: 'UNAUTHORIZED' });
    const nowhere = new LanesClient({ url: `http://127.0.0.1:${await freePort()}` });
    await expect(nowhere.get('x')).rejects.toBeInstanceOf(LanesUnreachableError);
    // A stream the API refuses for good ends the iteration instead of retrying forever.
    const iterate = async () => {
      for await (const _ of new LanesClient({ url: t.stack.url!, token: 'wrong' }).events({ reconnectDelayMs: 10 })) break;
    };
    await expect(iterate()).rejects.toMatchObject({ code: 'UNAUTHORIZED' });
  });

  it('follows a card through the event stream from now on, filtered by lane', async () => {
    const seen: StreamedEvent[] = [];
    const controller = new AbortController();
    let opened = false;
    const following = (async () => {
      for await (const e of client.events({ lane: 'sdk', signal: controller.signal, onOpen: () => (opened = true) })) {
        seen.push(e);
        if (e.type === 'card.done' && e.cardId === 'sdk-ev') break;
      }
    })();
    await waitFor('the stream to open', () => opened);
    await client.enqueue({ id: 'sdk-ev', lane: 'sdk', title: 'watched' });
    await following;
    // A stream opened without a resume point starts with new events: nothing from the earlier tests.
    expect(seen.map((e) => `${e.cardId}:${e.type}`)).toEqual(['sdk-ev:card.queued', 'sdk-ev:card.running', 'sdk-ev:card.done']);
    expect(seen.every((e) => e.cardId === 'sdk-ev' && e.lane === 'sdk' && /^\d+-\d+$/.test(e.id))).toBe(true);
  });

  it('resumes after the API restarts under it, losing and repeating nothing', async () => {
    // A second API on the same Redis, which the test stops and starts again on the same port.
    const port = await freePort();
    const startApi = () => startApiOnly(redis.url, t.lanes, port, { tokens: [TOKEN] });
    let api: Stack = await startApi();
    const flaky = new LanesClient({ url: `http://127.0.0.1:${port}`, token: TOKEN });
    const seen: StreamedEvent[] = [];
    let opens = 0;
    const reconnects: unknown[] = [];
    const controller = new AbortController();
    const following = (async () => {
      for await (const e of flaky.events({ cardId: 'sdk-gap', signal: controller.signal, reconnectDelayMs: 20, onOpen: () => opens++, onReconnect: (r) => reconnects.push(r) })) {
        seen.push(e);
        if (e.type === 'card.done') break;
      }
    })();
    try {
      await waitFor('the stream to open', () => opens === 1);
      // The API goes away before the card's first event, so the whole lifecycle happens while it is down.
      await api.stop();
      await client.enqueue({ id: 'sdk-gap', lane: 'sdk', title: 'while the API was down' });
      await waitFor('sdk-gap done', async () => (await client.get('sdk-gap')).state === 'done');
      expect(seen).toEqual([]);
      api = await startApi();
      await waitFor('the resumed stream to reach card.done', () => seen.some((e) => e.type === 'card.done'));
      await following;
    } finally {
      controller.abort();
      await api.stop();
    }
    expect(opens).toBeGreaterThanOrEqual(2);
    expect(reconnects.some((r) => r instanceof LanesUnreachableError)).toBe(true);
    // The reference: the same card's events read from the start of the stream, on the stack's own API.
    const reference: StreamedEvent[] = [];
    for await (const e of client.events({ since: '0-0', cardId: 'sdk-gap' })) {
      reference.push(e);
      if (e.type === 'card.done') break;
    }
    expect(seen.map((e) => e.id)).toEqual(reference.map((e) => e.id));
    expect(seen.map((e) => e.type)).toEqual(['card.queued', 'card.running', 'card.done']);
  });
  it('tells onGap when events after its resume point were trimmed before the replay, then goes on from the oldest event held', async () => {
    const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    try {
      const pipeline = conn.pipeline();
      for (let i = 0; i < 300; i++) {
        pipeline.xadd(keys.events(), '*', 'e', JSON.stringify({ type: 'card.queued', at: new Date().toISOString(), lane: 'sdk', cardId: `trimmed-${i}` }));
      }
      const ids = ((await pipeline.exec()) ?? []).map(([, id]) => id as string);
      // As the stream's MAXLEN does once it holds about 10,000 events (exact here, so the oldest held is known).
      await conn.xtrim(keys.events(), 'MAXLEN', 100);
      const gaps: EventGap[] = [];
      let first: StreamedEvent | undefined;
      for await (const e of client.events({ since: ids[0], onGap: (gap) => gaps.push(gap) })) {
        first = e;
        break;
      }
      expect(gaps).toEqual([{ after: ids[0], oldest: ids[200] }]);
      expect([first?.id, first?.cardId]).toEqual([ids[200], 'trimmed-200']);
    } finally {
      conn.disconnect();
    }
  });

  it('a stream refused for its token’s request rate asks again no sooner than Retry-After says', async () => {
    const SLOW = 'client-test-slow-poller';
    const api = await startApiOnly(redis.url, t.lanes, await freePort(), {
      tokens: [TOKEN],
      scopedTokens: [{ name: 'slow-poller', fromEnv: 'SLOW_POLLER', lanes: ['sdk'], role: 'read', requestsPerSecond: 0.5 }],
      tokenEnv: { SLOW_POLLER: SLOW },
    });
    const controller = new AbortController();
    try {
      const slow = new LanesClient({ url: api.url!, token: SLOW });
      // Its bucket (5 requests at 0.5 a second) spent: the next ask is refused for 2 s.
      for (let i = 0; i < 5; i++) await slow.lanes();
      const refusals: Array<{ atMs: number; retryAfterMs: number | undefined }> = [];
      let openedAtMs: number | undefined;
      const following = (async () => {
        for await (const _ of slow.events({
          signal: controller.signal,
          reconnectDelayMs: 10,
          onOpen: () => (openedAtMs = Date.now()),
          onReconnect: (err) => {
            if (err instanceof LanesApiError) refusals.push({ atMs: Date.now(), retryAfterMs: err.retryAfterMs });
          },
        }))
          break;
      })();
      await waitFor('the stream to open once its bucket refilled', () => openedAtMs !== undefined);
      expect(refusals.length).toBeGreaterThanOrEqual(1);
      expect(refusals[0]!.retryAfterMs).toBe(2_000);
      // Asked again only after the wait it was told, though its own reconnect delay is 10 ms.
      // (Less 20 ms: a timer may fire a millisecond before Date.now() says it is due.)
      for (const [i, r] of refusals.entries()) expect((refusals[i + 1]?.atMs ?? openedAtMs!) - r.atMs).toBeGreaterThanOrEqual(r.retryAfterMs! - 20);
      controller.abort();
      await following;
    } finally {
      controller.abort();
      await api.stop();
    }
  });
});
