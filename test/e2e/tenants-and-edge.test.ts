import { createHash } from 'node:crypto';
import { request as httpRequest } from 'node:http';
import { connect } from 'node:net';
import { Writable } from 'node:stream';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { LanesApiError, LanesClient } from '@lanes/client';
import { ConfigError, defaults, type CardRecord, type LaneStatus } from '@lanes/contracts';
import { QUEUE_PREFIX } from '@lanes/queue';
import { apiClient, startRedis, startTestStack, waitFor, type ApiClient, type TestRedis, type TestStack } from '../harness/index.js';

interface ErrorBody {
  error: { code: string; message: string; issues?: Array<{ path: string; message: string }> };
}

const agent = [process.execPath, DEMO_AGENT];
const LANES = [
  { name: 'lane-a', slots: 1, agent },
  { name: 'lane-b', slots: 1, agent },
];
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');

const ADMIN = 'admin-token-value-7f3a';
const READER = 'read-token-value-91cc';
const WRITER_A = 'lane-a-write-token-value-24be';

/** A plain HTTP request with full control of the headers (fetch will not send a chosen Host). */
function raw(url: string, options: { method?: string; path: string; headers?: Record<string, string>; body?: string }) {
  const { hostname, port } = new URL(url);
  return new Promise<{ status: number; body: ErrorBody | undefined }>((resolve, reject) => {
    const req = httpRequest({ hostname, port, method: options.method ?? 'GET', path: options.path, headers: options.headers ?? {} }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (c: string) => {
        text += c;
      });
      res.on('end', () => resolve({ status: res.statusCode!, body: text ? (JSON.parse(text) as ErrorBody) : undefined }));
    });
    req.on('error', reject);
    req.end(options.body);
  });
}

/** Opens /v1/events and collects each event until close(). */
async function openStream(url: string, token: string, query = '') {
  const controller = new AbortController();
  const res = await fetch(`${url}/v1/events${query}`, { headers: { authorization: `Bearer ${token}` }, signal: controller.signal });
  const events: Array<{ id: string; type: string; cardId?: string; lane: string }> = [];
  let ended = false;
  const pump =
    res.status === 200
      ? (async () => {
          const reader = res.body!.getReader();
          const decoder = new TextDecoder();
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
              const data = /^data: (.+)$/m.exec(block)?.[1];
              if (id && data) events.push({ id, ...(JSON.parse(data) as { type: string; cardId?: string; lane: string }) });
            }
          }
        })()
          .catch(() => undefined)
          .finally(() => {
            ended = true;
          })
      : Promise.resolve();
  return {
    res,
    events,
    ended: () => ended,
    async close() {
      controller.abort();
      await pump;
    },
  };
}

describe('boards are tenants: scoped tokens over a real API and Redis', () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;
  const logLines: string[] = [];
  let admin: ApiClient;
  let reader: ApiClient;
  let writerA: ApiClient;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logLines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
        done();
      },
    });
    // The API alone: cards stay queued, so each one can be read, cancelled and counted in Redis.
    t = await startTestStack(redis.url, LANES, {
      parts: { api: true, worker: false, supervisor: false },
      log: pino({ level: 'info' }, sink),
      tokens: [ADMIN],
      scopedTokens: [
        { name: 'scraper', sha256: sha256(READER), lanes: '*', role: 'read' },
        { name: 'board-a', fromEnv: 'BOARD_A_TOKEN', lanes: ['lane-a'], role: 'write' },
      ],
      tokenEnv: { BOARD_A_TOKEN: WRITER_A },
    });
    admin = apiClient(t.stack.url!, ADMIN);
    reader = apiClient(t.stack.url!, READER);
    writerA = apiClient(t.stack.url!, WRITER_A);
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  const cardKeys = async (pattern: string) => {
    const found: string[] = [];
    let cursor = '0';
    do {
      const [next, keys] = await conn.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      found.push(...keys);
      cursor = next;
    } while (cursor !== '0');
    return found;
  };

  it('the lane-A token gets 404 on a lane-B card, its cancel and unblock, exactly as for an unknown id; the card is untouched', async () => {
    expect((await admin.request('POST', '/v1/cards', { id: 'b-secret', lane: 'lane-b', title: 'not yours' })).status).toBe(202);
    for (const [method, path] of [
      ['GET', '/v1/cards/b-secret'],
      ['POST', '/v1/cards/b-secret/cancel'],
      ['POST', '/v1/cards/b-secret/unblock'],
    ] as const) {
      const hidden = await writerA.request<ErrorBody>(method, path, method === 'POST' ? {} : undefined);
      const unknown = await writerA.request<ErrorBody>(method, path.replace('b-secret', 'b-nothing'), method === 'POST' ? {} : undefined);
      expect(hidden.status, `${method} ${path}`).toBe(404);
      expect(hidden.body.error.code).toBe('NOT_FOUND');
      expect(hidden.body.error.message).toBe(unknown.body.error.message.replace('b-nothing', 'b-secret'));
    }
    expect((await admin.card('b-secret')).state).toBe('queued');
  });

  it('the lane-A token sees only lane A: lanes list, lane status, blocked list and scale', async () => {
    const listed = await writerA.request<{ lanes: LaneStatus[] }>('GET', '/v1/lanes');
    expect(listed.body.lanes.map((l) => l.name)).toEqual(['lane-a']);
    expect((await admin.lanes()).map((l) => l.name)).toEqual(['lane-a', 'lane-b']);
    for (const path of ['/v1/lanes/lane-b', '/v1/lanes/lane-b/blocked', '/v1/lanes/lane-b/scale']) {
      const res = await writerA.request<ErrorBody>('GET', path);
      expect(res.status, path).toBe(404);
      expect(res.body.error.message).toBe('lane lane-b not found');
      expect((await writerA.request('GET', path.replace('lane-b', 'lane-a'))).status, path).toBe(200);
    }
  });

  it('the lane-A token gets 404 on lane B events, and its unfiltered stream carries lane A only', async () => {
    const refused = await openStream(t.stack.url!, WRITER_A, '?lane=lane-b');
    expect(refused.res.status).toBe(404);
    const mine = await openStream(t.stack.url!, WRITER_A);
    const everything = await openStream(t.stack.url!, ADMIN);
    // Lane B's card goes first: by the time lane A's event is seen, lane B's was already in the stream.
    await admin.request('POST', '/v1/cards', { id: 'ev-b', lane: 'lane-b', title: 'b' });
    await admin.request('POST', '/v1/cards', { id: 'ev-a', lane: 'lane-a', title: 'a' });
    await waitFor('ev-a queued in the lane-A stream', () => mine.events.some((e) => e.cardId === 'ev-a'));
    await waitFor('ev-a queued in the admin stream', () => everything.events.some((e) => e.cardId === 'ev-a'));
    await mine.close();
    await everything.close();
    expect(mine.events.filter((e) => e.lane !== 'lane-a')).toEqual([]);
    // The admin's stream did carry lane B: the scope is what kept it out.
    expect(everything.events.some((e) => e.cardId === 'ev-b')).toBe(true);
  });

  it('a lane-A token enqueues to lane A; a lane outside its scope is refused as an unknown lane, the whole batch with it', async () => {
    expect((await writerA.request('POST', '/v1/cards', { id: 'a-own', lane: 'lane-a', title: 'mine' })).status).toBe(202);
    const single = await writerA.request<ErrorBody>('POST', '/v1/cards', { id: 'a-into-b', lane: 'lane-b', title: 'no' });
    const nowhere = await writerA.request<ErrorBody>('POST', '/v1/cards', { id: 'a-into-x', lane: 'lane-x', title: 'no' });
    expect(single.status).toBe(400);
    expect(single.body.error.issues).toEqual([{ path: 'lane', message: 'unknown lane "lane-b" (known: lane-a)' }]);
    expect(nowhere.body.error.issues).toEqual([{ path: 'lane', message: 'unknown lane "lane-x" (known: lane-a)' }]);
    const bulk = await writerA.request<ErrorBody>('POST', '/v1/cards', {
      cards: [
        { id: 'a-bulk-ok', lane: 'lane-a', title: 'fine alone' },
        { id: 'a-bulk-b', lane: 'lane-b', title: 'out of scope' },
      ],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.error.issues?.map((i) => i.path)).toEqual(['cards.1.lane']);
    for (const id of ['a-into-b', 'a-bulk-ok', 'a-bulk-b']) expect(await cardKeys(`*${id}*`), id).toEqual([]);
  });

  it('an id taken on lane B is a conflict for the lane-A token that never names lane B; the card is untouched', async () => {
    for (const body of [
      { id: 'b-secret', lane: 'lane-a', title: 'mine?' },
      {
        cards: [
          { id: 'a-free', lane: 'lane-a', title: 'ok' },
          { id: 'b-secret', lane: 'lane-a', title: 'mine?' },
        ],
      },
    ]) {
      const res = await writerA.request<ErrorBody>('POST', '/v1/cards', body);
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('CARD_CONFLICT');
      expect(JSON.stringify(res.body)).not.toContain('lane-b');
      expect(res.body.error.message).toContain('b-secret');
    }
    expect(await cardKeys('*a-free*')).toEqual([]);
    const kept = await admin.card('b-secret');
    expect(kept).toMatchObject({ state: 'queued', lane: 'lane-b', title: 'not yours' });
    // An admin, who sees every lane, is told which lane holds the id.
    const told = await admin.request<ErrorBody>('POST', '/v1/cards', { id: 'b-secret', lane: 'lane-a', title: 'x' });
    expect(told.status).toBe(409);
    expect(told.body.error.message).toContain('lane "lane-b"');
  });

  it('the lane-A token cancels its own card', async () => {
    const res = await writerA.request<{ state: string }>('POST', '/v1/cards/a-own/cancel');
    expect(res.status).toBe(202);
    expect((await admin.card('a-own')).state).toBe('cancelled');
  });

  it('the read token reads every lane but gets 403 FORBIDDEN on every write, and nothing is queued', async () => {
    const post = await reader.request<ErrorBody>('POST', '/v1/cards', { id: 'r-try', lane: 'lane-a', title: 'no' });
    expect(post.status).toBe(403);
    expect(post.body.error.code).toBe('FORBIDDEN');
    expect(await cardKeys('*r-try*')).toEqual([]);
    for (const action of ['cancel', 'unblock']) {
      const res = await reader.request<ErrorBody>('POST', `/v1/cards/b-secret/${action}`);
      expect(res.status, action).toBe(403);
      expect(res.body.error.code).toBe('FORBIDDEN');
    }
    expect((await reader.request<CardRecord>('GET', '/v1/cards/b-secret')).body.state).toBe('queued');
    expect((await reader.lanes()).map((l) => l.name)).toEqual(['lane-a', 'lane-b']);
    expect((await reader.request('GET', '/v1/lanes/lane-b/scale')).status).toBe(200);
    expect((await reader.request('GET', '/metrics')).status).toBe(200);
  });

  it('Bull Board and /metrics follow the role: read sees the board, only admin changes it; a lane-scoped token gets neither', async () => {
    expect((await reader.request('GET', '/admin/queues/api/queues')).status).toBe(200);
    const pause = await reader.request<ErrorBody>('PUT', '/admin/queues/api/queues/lane-a/pause');
    expect(pause.status).toBe(403);
    expect(pause.body.error.code).toBe('FORBIDDEN');
    for (const path of ['/admin/queues', '/admin/queues/api/queues', '/metrics']) {
      const res = await writerA.request<ErrorBody>('GET', path);
      expect(res.status, path).toBe(403);
      expect(res.body.error.code).toBe('FORBIDDEN');
    }
    expect((await writerA.request('PUT', '/admin/queues/api/queues/lane-a/pause')).status).toBe(403);
    expect((await admin.request('PUT', '/admin/queues/api/queues/lane-a/pause')).status).toBe(200);
    expect((await admin.request('PUT', '/admin/queues/api/queues/lane-a/resume')).status).toBe(200);
  });

  it('a path with percent-escapes is judged as the route it reaches: no write for the read token, no board or metrics for a lane-A token', async () => {
    // The router decodes escapes before it matches: /%761/cards is POST /v1/cards, /%61dmin/... Bull Board.
    const post = await reader.request<ErrorBody>('POST', '/%761/cards', { id: 'esc-try', lane: 'lane-a', title: 'no' });
    expect(post.status).toBe(403);
    expect(post.body.error.code).toBe('FORBIDDEN');
    expect(await cardKeys('*esc-try*')).toEqual([]);
    const cancel = await reader.request<ErrorBody>('POST', '/v1/%63ards/b-secret/cancel');
    expect(cancel.status).toBe(403);
    expect((await admin.card('b-secret')).state).toBe('queued');
    for (const path of ['/%61dmin/queues/api/queues', '/admin/%71ueues', '/%6detrics']) {
      const res = await writerA.request<ErrorBody>('GET', path);
      expect(res.status, path).toBe(403);
      expect(res.body.error.code).toBe('FORBIDDEN');
    }
    const laneB = new Queue('lane-b', { connection: conn, prefix: QUEUE_PREFIX });
    try {
      expect((await writerA.request('PUT', '/%61dmin/queues/api/queues/lane-b/pause')).status).toBe(403);
      expect((await reader.request('PUT', '/%61dmin/queues/api/queues/lane-b/pause')).status).toBe(403);
      expect(await laneB.isPaused()).toBe(false);
    } finally {
      await laneB.close();
    }
    // The browser edge reads the same path: a form's content type is refused there too.
    const form = await admin.request<ErrorBody>('POST', '/%761/cards/b-secret/cancel', '{}', { 'content-type': 'text/plain' });
    expect(form.status).toBe(415);
    expect((await admin.card('b-secret')).state).toBe('queued');
  });

  it('the admin token does everything, on every lane', async () => {
    expect((await admin.request('POST', '/v1/cards', { id: 'adm-b', lane: 'lane-b', title: 'b' })).status).toBe(202);
    expect((await admin.request('GET', '/v1/cards/adm-b')).status).toBe(200);
    expect((await admin.request('POST', '/v1/cards/adm-b/cancel')).status).toBe(202);
    expect((await admin.request('GET', '/v1/lanes/lane-b/blocked')).status).toBe(200);
    expect((await admin.request('GET', '/metrics')).status).toBe(200);
    expect((await admin.request('GET', '/admin/queues/api/queues')).status).toBe(200);
    const stream = await openStream(t.stack.url!, ADMIN, '?lane=lane-b&since=0-0');
    expect(stream.res.status).toBe(200);
    await waitFor('adm-b cancelled in the lane-B stream', () => stream.events.some((e) => e.cardId === 'adm-b' && e.type === 'card.cancelled'));
    await stream.close();
  });

  it('logs name the token that made each request, never a token value', () => {
    const requests = logLines.map((l) => JSON.parse(l) as { token?: string; msg?: string }).filter((l) => l.msg === 'request completed');
    const named = new Set(requests.map((l) => l.token));
    for (const name of ['LANES_API_TOKENS#1', 'scraper', 'board-a']) expect(named).toContain(name);
    const all = logLines.join('\n');
    for (const value of [ADMIN, READER, WRITER_A]) expect(all).not.toContain(value);
  });

  it('refuses a text/plain or type-less mutation with 415, and a cross-site or cross-origin one with 403; the card stays queued', async () => {
    await admin.request('POST', '/v1/cards', { id: 'edge-1', lane: 'lane-a', title: 'x' });
    const auth = { authorization: `Bearer ${ADMIN}` };
    const plain = await admin.request<ErrorBody>('POST', '/v1/cards/edge-1/cancel', '{}', { 'content-type': 'text/plain' });
    expect(plain.status).toBe(415);
    expect(plain.body.error.code).toBe('UNSUPPORTED_MEDIA_TYPE');
    const typeless = await raw(t.stack.url!, { method: 'POST', path: '/v1/cards/edge-1/cancel', headers: auth });
    expect(typeless.status).toBe(415);
    const form = await raw(t.stack.url!, {
      method: 'POST',
      path: '/v1/cards',
      headers: { ...auth, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'lane=lane-a&title=x',
    });
    expect(form.status).toBe(415);
    const evil = await admin.request<ErrorBody>('POST', '/v1/cards/edge-1/cancel', undefined, { origin: 'http://evil.example' });
    expect(evil.status).toBe(403);
    expect(evil.body.error.code).toBe('CROSS_SITE');
    const crossSite = await admin.request<ErrorBody>('POST', '/v1/cards/edge-1/cancel', undefined, { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.status).toBe(403);
    expect(crossSite.body.error.code).toBe('CROSS_SITE');
    expect((await admin.card('edge-1')).state).toBe('queued');
    // The same page's own origin, as a browser on the status page sends it, gets through.
    const own = await admin.request('POST', '/v1/cards/edge-1/cancel', undefined, { origin: t.stack.url!, 'sec-fetch-site': 'same-origin' });
    expect(own.status).toBe(202);
  });

  it('a 128-character id can be posted, read and cancelled; 129 is refused naming id', async () => {
    const id = `c${'x'.repeat(127)}`;
    expect(id).toHaveLength(128);
    expect((await admin.request('POST', '/v1/cards', { id, lane: 'lane-a', title: 'long id' })).status).toBe(202);
    const got = await admin.request<CardRecord>('GET', `/v1/cards/${id}`);
    expect(got.status).toBe(200);
    expect(got.body.id).toBe(id);
    const cancelled = await admin.request<{ state: string }>('POST', `/v1/cards/${id}/cancel`);
    expect(cancelled.status).toBe(202);
    expect((await admin.card(id)).state).toBe('cancelled');
    const tooLong = await admin.request<ErrorBody>('POST', '/v1/cards', { id: `${id}y`, lane: 'lane-a', title: 'too long' });
    expect(tooLong.status).toBe(400);
    expect(tooLong.body.error.issues?.map((i) => i.path)).toEqual(['id']);
  });

  it('refuses a bulk of 5,000 (and of 1,001) with 413 BULK_TOO_LARGE and queues nothing; 1,000 is taken', async () => {
    const cards = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, lane: 'lane-a', title: 'bulk' }));
    const waitingBefore = await conn.llen('lanes:lane-a:wait');
    for (const [prefix, n] of [
      ['bulk5k', 5_000],
      ['bulk1001', 1_001],
    ] as const) {
      const res = await admin.request<ErrorBody>('POST', '/v1/cards', { cards: cards(prefix, n) });
      expect(res.status, prefix).toBe(413);
      expect(res.body.error.code).toBe('BULK_TOO_LARGE');
      expect(await cardKeys(`*${prefix}-*`), prefix).toEqual([]);
    }
    expect(await conn.llen('lanes:lane-a:wait')).toBe(waitingBefore);
    const ok = await admin.request<{ cards: unknown[] }>('POST', '/v1/cards', { cards: cards('bulk1000', 1_000) });
    expect(ok.status).toBe(202);
    expect(ok.body.cards).toHaveLength(1_000);
    expect(await conn.llen('lanes:lane-a:wait')).toBe(waitingBefore + 1_000);
  });

  it('refuses metadata over 64 KiB with 400 naming metadata', async () => {
    const big = { blob: 'x'.repeat(64 * 1024) };
    const res = await admin.request<ErrorBody>('POST', '/v1/cards', { id: 'meta-big', lane: 'lane-a', title: 'm', metadata: big });
    expect(res.status).toBe(400);
    expect(res.body.error.issues?.map((i) => i.path)).toEqual(['metadata']);
    expect(await cardKeys('*meta-big*')).toEqual([]);
  });
});

describe("one board's flood stops at its lane's maxOpenCards; another board's lane takes cards as ever", () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;
  const WRITER_B = 'lane-b-write-token-value-5d01';
  const MAX = 40;
  const RETAINED = 25;
  const OPEN_BYTES = 1024 * 1024;
  const WRITER_C = 'lane-b-slow-token-value-8e42';
  // Slow enough that a loaded CI box, between the bulk's charge and the two refused posts after it,
  // refills less than one card: at 10 a second, a 1,000-card enqueue slower than 100 ms let the next post in.
  const RATED_PER_S = 0.5;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    t = await startTestStack(
      redis.url,
      [
        { ...LANES[0]!, maxOpenCards: MAX },
        { ...LANES[1]!, retention: { terminalCardDays: 7, maxCards: RETAINED }, maxOpenBytes: OPEN_BYTES },
      ],
      {
        parts: { api: true, worker: false, supervisor: false },
        scopedTokens: [
          { name: 'board-a', fromEnv: 'BOARD_A_TOKEN', lanes: ['lane-a'], role: 'write' },
          { name: 'board-b', fromEnv: 'BOARD_B_TOKEN', lanes: ['lane-b'], role: 'write' },
          { name: 'board-c', fromEnv: 'BOARD_C_TOKEN', lanes: ['lane-b'], role: 'write', cardsPerSecond: RATED_PER_S },
        ],
        tokens: [ADMIN],
        tokenEnv: { BOARD_A_TOKEN: WRITER_A, BOARD_B_TOKEN: WRITER_B, BOARD_C_TOKEN: WRITER_C },
      },
    );
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  it('fills lane A to its bound, then 429 LANE_FULL naming the field and the bound, with nothing queued; lane B is untouched; an ended card frees a place', async () => {
    const a = apiClient(t.stack.url!, WRITER_A);
    const b = apiClient(t.stack.url!, WRITER_B);
    const cards = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, lane: 'lane-a', title: 'flood' }));
    expect((await a.request('POST', '/v1/cards', { cards: cards('fill', MAX - 1) })).status).toBe(202);
    // A batch that would pass the bound is refused whole, though one of its cards would fit.
    const over = await a.request<ErrorBody>('POST', '/v1/cards', { cards: cards('over', 2) });
    expect(over.status).toBe(429);
    expect(over.body.error.code).toBe('LANE_FULL');
    expect(over.body.error.issues).toEqual([
      { path: 'cards.0.lane', message: `lane "lane-a" holds ${MAX - 1} open cards (queued, running or blocked); 2 more would pass its maxOpenCards of ${MAX}` },
    ]);
    expect(await conn.exists('lanes-store:card:over-0', 'lanes-store:card:over-1', 'lanes:lane-a:over-0', 'lanes:lane-a:over-1')).toBe(0);
    expect((await a.request('POST', '/v1/cards', { id: 'last', lane: 'lane-a', title: 'fits' })).status).toBe(202);
    const single = await a.request<ErrorBody>('POST', '/v1/cards', { id: 'one-more', lane: 'lane-a', title: 'no room' });
    expect([single.status, single.body.error.code, single.body.error.issues?.[0]?.path]).toEqual([429, 'LANE_FULL', 'lane']);
    expect(await conn.llen('lanes:lane-a:wait')).toBe(MAX);
    // The board sees its room: GET /v1/lanes names what the lane holds open against its bounds.
    const [status] = await a.lanes();
    expect(status?.open).toEqual({ cards: MAX, maxCards: MAX, bytes: expect.any(Number), maxBytes: defaults.DEFAULT_MAX_OPEN_BYTES });
    expect(status?.open?.bytes).toBeGreaterThan(MAX * 50);
    // A repeat of a card it holds is answered, not refused: a board retrying its own post learns its card's state.
    expect((await a.request<{ state: string }>('POST', '/v1/cards', { id: 'last', lane: 'lane-a', title: 'fits' })).status).toBe(200);
    // The other tenant's lane takes cards as ever.
    expect((await b.request('POST', '/v1/cards', { cards: Array.from({ length: MAX + 5 }, (_, i) => ({ id: `b-${i}`, lane: 'lane-b', title: 'mine' })) })).status).toBe(202);
    // An ended card gives its place back.
    expect((await a.request<{ state: string }>('POST', '/v1/cards/fill-0/cancel')).body.state).toBe('cancelled');
    expect((await a.request('POST', '/v1/cards', { id: 'one-more', lane: 'lane-a', title: 'room now' })).status).toBe(202);
  });

  it('a post-and-cancel loop keeps at most retention.maxCards finished cards: the oldest go, the newest stay readable', async () => {
    const b = apiClient(t.stack.url!, WRITER_B);
    const ids: string[] = [];
    for (let round = 0; round < 3; round++) {
      const batch = Array.from({ length: 20 }, (_, i) => ({ id: `loop-${round}-${i}`, lane: 'lane-b', title: 'churn' }));
      expect((await b.request('POST', '/v1/cards', { cards: batch })).status).toBe(202);
      for (const card of batch) {
        expect((await b.request<{ state: string }>('POST', `/v1/cards/${card.id}/cancel`)).body.state).toBe('cancelled');
        ids.push(card.id);
      }
    }
    const held = await Promise.all(ids.map(async (id) => (await conn.exists(`lanes-store:card:${id}`)) === 1));
    expect(held.filter(Boolean)).toHaveLength(RETAINED);
    expect(held.slice(-RETAINED).every(Boolean)).toBe(true);
    expect((await b.request('GET', `/v1/cards/${ids[0]}`)).status).toBe(404);
    expect((await b.card(ids.at(-1)!)).state).toBe('cancelled');
    expect(await conn.zcard('lanes-store:lane:lane-b:cards:cancelled')).toBe(RETAINED);
  });

  it('a token past its cardsPerSecond gets 429 RATE_LIMITED with Retry-After, nothing queued; other tokens post as ever; after the wait it posts again', async () => {
    const c = new LanesClient({ url: t.stack.url!, token: WRITER_C });
    const bulk = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => ({ id: `${prefix}-${i}`, lane: 'lane-b', title: 'rated' }));
    // A full bucket holds one full bulk.
    expect(await c.enqueueMany(bulk('rated', 1_000))).toHaveLength(1_000);
    const refused = await c.enqueue({ id: 'rated-over', lane: 'lane-b', title: 'too soon' }).catch((err: unknown) => err);
    expect(refused).toBeInstanceOf(LanesApiError);
    const err = refused as LanesApiError;
    expect([err.status, err.code, err.retry]).toEqual([429, 'RATE_LIMITED', 'transient']);
    expect(err.message).toContain(`token "board-c" may post ${RATED_PER_S} cards per second`);
    // One card is 2 s at this rate; Retry-After is whole seconds of what is still short.
    expect([1_000, 2_000]).toContain(err.retryAfterMs);
    expect(await conn.exists('lanes-store:card:rated-over')).toBe(0);
    // Retries count too.
    expect((await apiClient(t.stack.url!, WRITER_C).request<ErrorBody>('POST', '/v1/cards/loop-2-19/retry')).body.error.code).toBe('RATE_LIMITED');
    // Another board's token, and the operator's admin token, are not slowed by it.
    expect((await apiClient(t.stack.url!, WRITER_B).request('POST', '/v1/cards', { id: 'b-meanwhile', lane: 'lane-b', title: 'mine' })).status).toBe(202);
    expect((await apiClient(t.stack.url!, ADMIN).request('POST', '/v1/cards', { cards: bulk('admin', 1_000) })).status).toBe(202);
    expect((await apiClient(t.stack.url!, ADMIN).request('POST', '/v1/cards', { cards: bulk('admin-again', 1_000) })).status).toBe(202);
    // The bucket refills at the rate: after the wait the API named, the card is taken.
    await new Promise((resolve) => setTimeout(resolve, err.retryAfterMs));
    expect((await c.enqueue({ id: 'rated-over', lane: 'lane-b', title: 'in time' })).created).toBe(true);
  });

  it("a card whose JSON would take the lane's open cards past maxOpenBytes gets 429 LANE_FULL naming the bytes; a small one still fits", async () => {
    const b = apiClient(t.stack.url!, WRITER_B);
    const big = await b.request<ErrorBody>('POST', '/v1/cards', { id: 'b-huge', lane: 'lane-b', title: 'huge', prompt: 'x'.repeat(1_000_000) });
    expect([big.status, big.body.error.code, big.body.error.issues?.[0]?.path]).toEqual([429, 'LANE_FULL', 'lane']);
    expect(big.body.error.message).toMatch(new RegExp(`lane "lane-b" holds \\d+ bytes of open cards .*; \\d+ more would pass its maxOpenBytes of ${OPEN_BYTES}`));
    expect(await conn.exists('lanes-store:card:b-huge')).toBe(0);
    expect((await b.request('POST', '/v1/cards', { id: 'b-small', lane: 'lane-b', title: 'small', prompt: 'x'.repeat(1_000) })).status).toBe(202);
  });
});

describe('the edge in open mode (no tokens)', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, LANES, { parts: { api: true, worker: false, supervisor: false } });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('answers loopback Host names only (DNS rebinding reaches nothing)', async () => {
    const { port } = new URL(t.stack.url!);
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost']) {
      expect((await raw(t.stack.url!, { path: '/v1/lanes', headers: { host } })).status, host).toBe(200);
    }
    for (const host of [`evil.example:${port}`, `127.0.0.1.nip.io:${port}`, '10.0.0.5']) {
      const res = await raw(t.stack.url!, { path: '/v1/lanes', headers: { host } });
      expect(res.status, host).toBe(421);
      expect(res.body?.error.code).toBe('HOST_NOT_LOOPBACK');
    }
  });

  it('refuses to listen on a non-loopback address with no tokens, naming LANES_HOST; with a token it listens', async () => {
    const refused = startTestStack(redis.url, LANES, { parts: { api: true, worker: false, supervisor: false }, host: '0.0.0.0' });
    await expect(refused).rejects.toBeInstanceOf(ConfigError);
    await expect(refused).rejects.toThrow(/LANES_HOST.*refusing to listen on 0\.0\.0\.0 with no API tokens/);
    const guarded = await startTestStack(redis.url, LANES, { parts: { api: true, worker: false, supervisor: false }, host: '0.0.0.0', tokens: ['tok'] });
    await guarded.stop();
  });
});

describe('edge timeouts', () => {
  const REQUEST_TIMEOUT_MS = 1_000;
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, LANES, { parts: { api: true, worker: false, supervisor: false }, apiLimits: { requestTimeoutMs: REQUEST_TIMEOUT_MS } });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('answers a request that never finishes arriving with 408 REQUEST_TIMEOUT', async () => {
    const { hostname, port } = new URL(t.stack.url!);
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (c: string) => {
      answer += c;
    });
    const closed = new Promise((r) => socket.once('close', r));
    // Headers promise a body that never comes.
    socket.write('POST /v1/cards HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"lane":');
    await waitFor('the API to answer the stalled request', () => answer.includes('\r\n\r\n') || socket.destroyed, { timeoutMs: 10 * REQUEST_TIMEOUT_MS });
    await closed;
    expect(answer).toMatch(/^HTTP\/1\.1 408 /);
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ error: { code: 'REQUEST_TIMEOUT' } });
  });

  it('keeps an SSE stream open past the request timeout, still delivering events', async () => {
    const stream = await openStream(t.stack.url!, '');
    expect(stream.res.status).toBe(200);
    const opened = Date.now();
    // The stream's lifetime is the subject: let three request timeouts (and the server's checks) pass.
    await waitFor('three request timeouts to pass', () => Date.now() - opened > 3 * REQUEST_TIMEOUT_MS || stream.ended(), { timeoutMs: 10 * REQUEST_TIMEOUT_MS });
    expect(stream.ended()).toBe(false);
    await t.api.request('POST', '/v1/cards', { id: 'late', lane: 'lane-a', title: 'after the timeout' });
    await waitFor('the late card on the old stream', () => stream.events.some((e) => e.cardId === 'late'));
    await stream.close();
  });
});
