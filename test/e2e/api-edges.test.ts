import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { LaneStatus } from '@lanes/contracts';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

interface ErrorBody {
  error: { code: string; message: string; issues?: Array<{ path: string; message: string }> };
}

/** The API's less travelled answers, over a real stack: one lane, real Redis, real local sandboxes. */
describe('API edges', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'edge', slots: 1, agent: [process.execPath, DEMO_AGENT] }]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('GET /v1/lanes/:name answers the one lane as the list does; an unknown lane is 404', async () => {
    await waitFor('the slot to have a live sandbox', async () => (await t.api.lanes())[0]!.slots[0]?.sandbox?.state === 'live');
    const one = await t.api.request<LaneStatus>('GET', '/v1/lanes/edge');
    expect(one.status).toBe(200);
    const listed = (await t.api.lanes())[0]!;
    expect(one.body).toMatchObject({ name: 'edge', provider: listed.provider, breaker: listed.breaker });
    expect(one.body.slots.map((s) => s.sandbox?.id)).toEqual(listed.slots.map((s) => s.sandbox?.id));
    const unknown = await t.api.request<ErrorBody>('GET', '/v1/lanes/nope');
    expect(unknown.status).toBe(404);
    expect(unknown.body.error.code).toBe('NOT_FOUND');
  });

  it('GET /v1/sandboxes/:id of an unknown sandbox is 404', async () => {
    const res = await t.api.request<ErrorBody>('GET', '/v1/sandboxes/sb-never-was');
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('NOT_FOUND');
  });

  it('refuses {cards: []} with 400 naming cards', async () => {
    const res = await t.api.request<ErrorBody>('POST', '/v1/cards', { cards: [] });
    expect(res.status).toBe(400);
    expect(res.body.error.issues?.map((i) => i.path)).toEqual(['cards']);
  });

  it('refuses duplicate ids in one request with 400 naming the second, and enqueues none of the batch', async () => {
    const res = await t.api.request<ErrorBody>('POST', '/v1/cards', {
      cards: [
        { id: 'dup-1', lane: 'edge', title: 'first' },
        { id: 'dup-1', lane: 'edge', title: 'again' },
        { id: 'dup-2', lane: 'edge', title: 'innocent bystander' },
      ],
    });
    expect(res.status).toBe(400);
    expect(res.body.error.issues?.map((i) => i.path)).toEqual(['cards.1.id']);
    for (const id of ['dup-1', 'dup-2']) expect((await t.api.request('GET', `/v1/cards/${id}`)).status).toBe(404);
  });

  it('a bulk re-post of existing cards answers 200 with created:false; one new card makes it 202', async () => {
    const cards = [
      { id: 'bulk-a', lane: 'edge', title: 'a' },
      { id: 'bulk-b', lane: 'edge', title: 'b' },
    ];
    expect((await t.api.request('POST', '/v1/cards', { cards })).status).toBe(202);
    for (const c of cards) await t.api.waitCard(c.id, 'done', (r) => r.state === 'done');
    const again = await t.api.request<{ cards: unknown[] }>('POST', '/v1/cards', { cards });
    expect(again.status).toBe(200);
    expect(again.body.cards).toEqual([
      { id: 'bulk-a', state: 'done', created: false },
      { id: 'bulk-b', state: 'done', created: false },
    ]);
    const mixed = await t.api.request<{ cards: unknown[] }>('POST', '/v1/cards', { cards: [...cards, { id: 'bulk-c', lane: 'edge', title: 'c' }] });
    expect(mixed.status).toBe(202);
    expect(mixed.body.cards).toContainEqual({ id: 'bulk-c', state: 'queued', created: true });
    await t.api.waitCard('bulk-c', 'done', (r) => r.state === 'done');
    for (const c of cards) expect((await t.api.card(c.id)).history.filter((h) => h.state === 'running')).toHaveLength(1);
  });

  it('refuses an unblock with an invalid body with 400 naming the field, and the card stays blocked', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'unblock-bad', lane: 'edge', title: 'help', metadata: { needsHuman: 'which base?' } });
    await t.api.waitCard('unblock-bad', 'blocked', (c) => c.state === 'blocked' && c.blockedReason === 'needs-human');
    for (const body of [{ note: 42 }, { note: 'ok', extra: true }]) {
      const res = await t.api.request<ErrorBody>('POST', '/v1/cards/unblock-bad/unblock', body);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('BODY_INVALID');
      expect(res.body.error.issues?.length).toBeGreaterThan(0);
    }
    expect((await t.api.card('unblock-bad')).state).toBe('blocked');
    expect((await t.api.request('POST', '/v1/cards/unblock-bad/unblock', { note: 'use main' })).status).toBe(202);
    await t.api.waitCard('unblock-bad', 'back in the queue', (c) => c.state !== 'blocked');
  });

  it('/readyz answers 503 when Redis is there but does not answer in time', async () => {
    expect((await t.api.request('GET', '/readyz')).status).toBe(200);
    // Frozen, not gone: the connection stays open and the ping simply never comes back.
    process.kill(redis.pid!, 'SIGSTOP');
    try {
      const res = await t.api.request<ErrorBody>('GET', '/readyz');
      expect(res.status).toBe(503);
      expect(res.body.error).toMatchObject({ code: 'NOT_READY', message: 'redis: redis ping timed out' });
      expect((await t.api.request('GET', '/healthz')).status).toBe(200);
    } finally {
      process.kill(redis.pid!, 'SIGCONT');
    }
    await waitFor('readyz after Redis thaws', async () => (await t.api.request('GET', '/readyz')).status === 200);
  });

  it.each([
    ['id', { id: '..' }],
    ['id', { id: '.' }],
    ['id', { id: '-rf' }],
    ['pr.branch', { pr: { number: 1, branch: '--upload-pack=touch /tmp/pwn', base: 'main' } }],
    ['pr.branch', { pr: { number: 1, branch: 'a..b', base: 'main' } }],
    ['pr.branch', { pr: { number: 1, branch: 'has space', base: 'main' } }],
    ['pr.base', { pr: { number: 1, branch: 'fix/x', base: 'ma\u0007in' } }],
  ])('a card whose %s is a trap is refused with 400 naming the field, and nothing is queued', async (field, extra) => {
    const before = (await t.api.lanes())[0]!.counts;
    const res = await t.api.request<ErrorBody>('POST', '/v1/cards', { lane: 'edge', title: 'trap', ...extra });
    expect(res.status).toBe(400);
    expect(res.body.error.issues?.map((i) => i.path)).toContain(field);
    expect((await t.api.lanes())[0]!.counts).toEqual(before);
  });
});
