import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { apiClient, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

describe('auth and the event stream', () => {
  let redis: TestRedis;
  let t: TestStack;
  const token = 's3cret-token-for-tests';

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(
      redis.url,
      [
        { name: 'auth-lane', slots: 1, agent: [process.execPath, DEMO_AGENT] },
        { name: 'other-lane', slots: 1, agent: [process.execPath, DEMO_AGENT] },
      ],
      { tokens: [token, 'second-token'] },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('refuses requests without a valid bearer token, health stays open', async () => {
    const anon = apiClient(t.stack.url!);
    const res = await anon.request<{ error: { code: string } }>('GET', '/v1/lanes');
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('UNAUTHORIZED');
    expect((await apiClient(t.stack.url!, 'wrong').request('GET', '/v1/lanes')).status).toBe(401);
    expect((await apiClient(t.stack.url!, `${token}x`).request('GET', '/v1/lanes')).status).toBe(401);
    expect((await anon.request('GET', '/healthz')).status).toBe(200);
    expect((await anon.request('GET', '/readyz')).status).toBe(200);
    expect((await anon.request('GET', '/metrics')).status).toBe(401);
    expect((await apiClient(t.stack.url!, token).request('GET', '/v1/lanes')).status).toBe(200);
    expect((await apiClient(t.stack.url!, 'second-token').request('GET', '/v1/lanes')).status).toBe(200);
  });

  it('puts Bull Board behind the same tokens, reachable from a browser with Basic auth', async () => {
    const anon = apiClient(t.stack.url!);
    const denied = await anon.request('GET', '/admin/queues');
    expect(denied.status).toBe(401);
    expect(denied.headers.get('www-authenticate')).toContain('Basic');
    expect((await anon.request('GET', '/admin/queues/api/queues')).status).toBe(401);
    const basic = `Basic ${Buffer.from(`ops:${token}`).toString('base64')}`;
    const page = await anon.request('GET', '/admin/queues', undefined, { authorization: basic });
    expect(page.status).toBe(200);
    const wrongBasic = `Basic ${Buffer.from('ops:nope').toString('base64')}`;
    expect((await anon.request('GET', '/admin/queues', undefined, { authorization: wrongBasic })).status).toBe(401);
  });

  /** Opens the event stream and collects each event (id, type, data) until `close()`. */
  async function openStream(query: string, headers: Record<string, string> = {}) {
    const controller = new AbortController();
    const res = await fetch(`${t.stack.url}/v1/events${query}`, { headers: { authorization: `Bearer ${token}`, ...headers }, signal: controller.signal });
    const events: Array<{ id: string; type: string; cardId?: string; lane?: string }> = [];
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const pump = (async () => {
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let end: number;
        while ((end = buf.indexOf('\n\n')) >= 0) {
          const block = buf.slice(0, end);
          buf = buf.slice(end + 2);
          const id = /^id: (.+)$/m.exec(block)?.[1];
          const type = /^event: (.+)$/m.exec(block)?.[1];
          const data = /^data: (.+)$/m.exec(block)?.[1];
          if (id && type && data) events.push({ id, type, ...(JSON.parse(data) as { cardId?: string; lane?: string }) });
        }
      }
    })().catch(() => undefined);
    return {
      res,
      events,
      async close() {
        controller.abort();
        await pump;
      },
    };
  }

  it('streams card events over SSE, only those of the ?lane= asked for', async () => {
    const stream = await openStream('?lane=auth-lane');
    expect(stream.res.status).toBe(200);
    expect(stream.res.headers.get('content-type')).toContain('text/event-stream');
    const api = apiClient(t.stack.url!, token);
    // The other lane's card runs first, so its events are in the stream before the ones awaited below.
    await api.request('POST', '/v1/cards', { id: 'sse-other', lane: 'other-lane', title: 'not asked for' });
    await api.waitCard('sse-other', 'done', (c) => c.state === 'done');
    await api.request('POST', '/v1/cards', { id: 'sse-1', lane: 'auth-lane', title: 'streamed' });
    await waitFor('card.done of sse-1 over SSE', () => stream.events.some((e) => e.type === 'card.done' && e.cardId === 'sse-1'));
    await stream.close();
    expect(stream.events.filter((e) => e.cardId === 'sse-1').map((e) => e.type)).toEqual(expect.arrayContaining(['card.queued', 'card.running', 'card.done']));
    expect(stream.events.filter((e) => e.lane !== 'auth-lane')).toEqual([]);

    // The unfiltered stream did carry the other lane's events: the filter is what kept them out.
    const all = await openStream('?since=0-0');
    await waitFor('card.done of sse-other in the unfiltered stream', () => all.events.some((e) => e.type === 'card.done' && e.cardId === 'sse-other'));
    await all.close();
  });

  it('resumes after Last-Event-ID, and after ?since=, with nothing before it', async () => {
    const api = apiClient(t.stack.url!, token);
    await api.request('POST', '/v1/cards', { id: 'sse-resume', lane: 'auth-lane', title: 'resumed' });
    await api.waitCard('sse-resume', 'done', (c) => c.state === 'done');
    // Everything so far, from the start of the log.
    const full = await openStream('?since=0-0&lane=auth-lane');
    await waitFor('card.done of sse-resume from the start', () => full.events.some((e) => e.type === 'card.done' && e.cardId === 'sse-resume'));
    await full.close();
    const mine = full.events.filter((e) => e.cardId === 'sse-resume');
    const queued = mine.find((e) => e.type === 'card.queued')!;
    expect(queued).toBeDefined();
    const expected = full.events.slice(full.events.indexOf(queued) + 1).map((e) => e.id);
    expect(expected.length).toBeGreaterThan(0);

    for (const [query, headers] of [
      ['?lane=auth-lane', { 'last-event-id': queued.id }],
      [`?lane=auth-lane&since=${queued.id}`, {}],
    ] as const) {
      const resumed = await openStream(query, headers);
      await waitFor(`the resumed stream (${query}) to catch up`, () => resumed.events.length >= expected.length);
      await resumed.close();
      expect(resumed.events.map((e) => e.id).slice(0, expected.length)).toEqual(expected);
      expect(resumed.events.map((e) => e.id)).not.toContain(queued.id);
    }
  });
});
