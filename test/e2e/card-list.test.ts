import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { CardPage, CardRecord } from '@lanes/contracts';
import { apiClient, startRedis, startTestStack, type ApiClient, type TestRedis, type TestStack } from '../harness/index.js';

interface ErrorBody {
  error: { code: string; message: string; issues?: Array<{ path: string; message: string }> };
}

const agent = [process.execPath, DEMO_AGENT];
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const ADMIN = 'list-admin-token-5d1e';
const READER_A = 'list-read-a-token-0c7b';
const WRITER_A = 'list-write-a-token-a3f9';

/**
 * `GET /v1/cards` and `POST /v1/cards/:id/retry` over a real API and Redis, with scoped tokens. The
 * API alone: cards stay queued until the test moves them (cancel), so what is listed is known.
 */
describe('listing and retrying cards over HTTP', () => {
  let redis: TestRedis;
  let t: TestStack;
  let admin: ApiClient;
  let readerA: ApiClient;
  let writerA: ApiClient;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(
      redis.url,
      [
        { name: 'list-a', agent },
        { name: 'list-b', agent },
      ],
      {
        parts: { api: true, worker: false, supervisor: false },
        tokens: [ADMIN],
        scopedTokens: [
          { name: 'reader-a', sha256: sha256(READER_A), lanes: ['list-a'], role: 'read' },
          { name: 'writer-a', sha256: sha256(WRITER_A), lanes: ['list-a'], role: 'write' },
        ],
      },
    );
    admin = apiClient(t.stack.url!, ADMIN);
    readerA = apiClient(t.stack.url!, READER_A);
    writerA = apiClient(t.stack.url!, WRITER_A);
    const cards = [
      ...Array.from({ length: 23 }, (_, i) => ({ id: `a-${String(i).padStart(2, '0')}`, lane: 'list-a', title: `a ${i}` })),
      ...Array.from({ length: 5 }, (_, i) => ({ id: `b-${i}`, lane: 'list-b', title: `b ${i}` })),
    ];
    // One at a time, so their update times (ms) are in posting order, mostly.
    for (const card of cards) expect((await admin.request('POST', '/v1/cards', card)).status).toBe(202);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  const list = (client: ApiClient, query: string) => client.request<CardPage & ErrorBody>('GET', `/v1/cards${query}`);
  /** Every page of a listing, following nextCursor. */
  const pages = async (client: ApiClient, query: string) => {
    const out: CardPage[] = [];
    let cursor: string | undefined;
    do {
      const res = await list(client, `${query}${query ? '&' : '?'}${cursor ? `cursor=${encodeURIComponent(cursor)}` : ''}`);
      expect(res.status).toBe(200);
      out.push(res.body);
      cursor = res.body.nextCursor;
    } while (cursor);
    return out;
  };

  it('pages through a lane newest update first, every card once, the snapshot fixed by the first page', async () => {
    const all = await pages(admin, '?lane=list-a&limit=7');
    expect(all.map((p) => p.cards.length)).toEqual([7, 7, 7, 2]);
    const ids = all.flatMap((p) => p.cards.map((c) => c.id));
    expect(new Set(ids).size).toBe(23);
    const updated = all.flatMap((p) => p.cards.map((c) => Date.parse(c.updatedAt)));
    expect(updated).toEqual([...updated].sort((x, y) => y - x));
    expect(new Set(all.map((p) => p.snapshotAt)).size).toBe(1);
    // A summary, not the record: no history, prompt or metadata.
    expect(Object.keys(all[0]!.cards[0]!)).not.toContain('history');
  });

  it('without a lane, lists every lane the token may see; a lane outside its scope is never listed', async () => {
    const everything = (await pages(admin, '?limit=200')).flatMap((p) => p.cards);
    expect(everything.map((c) => c.lane).sort()).toEqual([...Array(23).fill('list-a'), ...Array(5).fill('list-b')]);
    const scoped = (await pages(readerA, '?limit=10')).flatMap((p) => p.cards);
    expect(scoped).toHaveLength(23);
    expect(scoped.every((c) => c.lane === 'list-a')).toBe(true);
  });

  it('a lane outside the token’s scope is 404 by name, word for word as a lane that does not exist; the read role suffices for its own', async () => {
    const hidden = await list(readerA, '?lane=list-b');
    const unknown = await list(readerA, '?lane=list-zz');
    expect(hidden.status).toBe(404);
    expect(hidden.body.error).toEqual({ code: 'NOT_FOUND', message: 'lane list-b not found' });
    expect(unknown.body.error.message).toBe('lane list-zz not found');
    expect((await list(readerA, '?lane=list-a&state=queued')).status).toBe(200);
    expect((await list(admin, '?lane=list-b')).body.cards).toHaveLength(5);
  });

  it.each([
    ['?limit=0', 'limit'],
    ['?limit=201', 'limit'],
    ['?limit=ten', 'limit'],
    ['?state=finished', 'state'],
    ['?blockedReason=tired', 'blockedReason'],
    ['?state=queued&blockedReason=needs-human', 'blockedReason'],
    ['?updatedSince=yesterday', 'updatedSince'],
    ['?lane=has:colon', 'lane'],
    ['?lane=list-a&lane=list-b', 'lane'],
    ['?status=queued', 'status'],
    ['?cursor=not-a-cursor', 'cursor'],
  ])('%s is 400 QUERY_INVALID naming %j', async (query, path) => {
    const res = await list(admin, query);
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('QUERY_INVALID');
    expect(res.body.error.issues?.map((i) => i.path)).toContain(path);
  });

  it('a cursor is refused on another filter', async () => {
    const first = await list(admin, '?lane=list-a&limit=2');
    const other = await list(admin, `?lane=list-b&limit=2&cursor=${first.body.nextCursor}`);
    expect(other.status).toBe(400);
    expect(other.body.error.issues?.[0]?.path).toBe('cursor');
  });

  it('retry: a cancelled card is queued again with its history and the reason; listed by its new state', async () => {
    expect((await writerA.request('POST', '/v1/cards/a-00/cancel')).status).toBe(202);
    const cancelled = (await list(readerA, '?lane=list-a&state=cancelled')).body.cards.map((c) => c.id);
    expect(cancelled).toEqual(['a-00']);

    const res = await writerA.request<{ id: string; state: string }>('POST', '/v1/cards/a-00/retry', { reason: 'the board asked again' });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ id: 'a-00', state: 'queued' });
    const card = await admin.card('a-00');
    expect(card.history.map((h) => [h.state, h.message])).toEqual([
      ['queued', 'enqueued'],
      ['cancelled', 'cancelled before it ran'],
      ['queued', 'retried: the board asked again'],
    ]);
    expect((await list(readerA, '?lane=list-a&state=cancelled')).body.cards).toEqual([]);
    expect((await list(readerA, '?lane=list-a&limit=1')).body.cards[0]).toMatchObject({ id: 'a-00', state: 'queued', attempts: 0 });

    // A body is optional; with no reason the entry says only that it was retried.
    await writerA.request('POST', '/v1/cards/a-01/cancel');
    expect((await writerA.request('POST', '/v1/cards/a-01/retry')).status).toBe(202);
    expect((await admin.card('a-01')).history.at(-1)?.message).toBe('retried');
  });

  it('retry is refused: a queued card 409 CARD_STATE, a read token 403, another lane’s card 404, a bad body 400, no JSON type 415', async () => {
    const queued = await writerA.request<ErrorBody>('POST', '/v1/cards/a-05/retry', {});
    expect(queued.status).toBe(409);
    expect(queued.body.error.code).toBe('CARD_STATE');
    expect(queued.body.error.message).toContain('only a failed or cancelled card can be retried');

    const read = await readerA.request<ErrorBody>('POST', '/v1/cards/a-05/retry', {});
    expect(read.status).toBe(403);
    expect(read.body.error.code).toBe('FORBIDDEN');

    await admin.request('POST', '/v1/cards/b-0/cancel');
    const hidden = await writerA.request<ErrorBody>('POST', '/v1/cards/b-0/retry', {});
    const unknown = await writerA.request<ErrorBody>('POST', '/v1/cards/b-none/retry', {});
    expect(hidden.status).toBe(404);
    expect(hidden.body.error.message).toBe(unknown.body.error.message.replace('b-none', 'b-0'));
    expect((await admin.card('b-0')).state).toBe('cancelled');

    const bad = await writerA.request<ErrorBody>('POST', '/v1/cards/a-05/retry', { reason: 5 });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues?.map((i) => i.path)).toEqual(['reason']);
    const extra = await writerA.request<ErrorBody>('POST', '/v1/cards/a-05/retry', { reason: 'x', attempts: 9 });
    expect(extra.status).toBe(400);

    const form = await writerA.request<ErrorBody>('POST', '/v1/cards/a-05/retry', 'reason=x', { 'content-type': 'application/x-www-form-urlencoded' });
    expect(form.status).toBe(415);
    expect(((await admin.card('a-05')) as CardRecord).history).toHaveLength(1);
  });
});
