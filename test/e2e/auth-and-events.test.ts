import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { apiClient, startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

describe('auth and the event stream', () => {
  let redis: TestRedis;
  let t: TestStack;
  const token = 's3cret-token-for-tests';

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'auth-lane', slots: 1, agent: [process.execPath, DEMO_AGENT] }], { tokens: [token, 'second-token'] });
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

  it('streams card events over SSE', async () => {
    const controller = new AbortController();
    const res = await fetch(`${t.stack.url}/v1/events?lane=auth-lane`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/event-stream');
    const seen: string[] = [];
    const reader = res.body!.getReader();
    const decoder = new TextDecoder();
    const pump = (async () => {
      let buf = '';
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value);
        for (const m of buf.matchAll(/^event: (.+)$/gm)) if (!seen.includes(m[1]!)) seen.push(m[1]!);
      }
    })().catch(() => undefined);
    const api = apiClient(t.stack.url!, token);
    await api.request('POST', '/v1/cards', { id: 'sse-1', lane: 'auth-lane', title: 'streamed' });
    await waitFor('card.done over SSE', () => seen.includes('card.done'));
    expect(seen).toEqual(expect.arrayContaining(['card.queued', 'card.running', 'card.done']));
    controller.abort();
    await pump;
  });
});
