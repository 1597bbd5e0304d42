import { once } from 'node:events';
import type { Socket } from 'node:net';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { parseLanesConfig, type LaneEvent } from '@lanes/contracts';
import { createRedis, EventLog } from '@lanes/queue';
import { testLog, useRedis, waitFor } from '../../../test/harness/index.js';
import { createApiServer, type ApiOptions, type ApiServer } from '../src/index.js';
import { RawSseClient } from './raw-sse-client.js';

const LANES = parseLanesConfig({
  lanes: [
    { name: 'sse-a', agent: ['true'] },
    { name: 'sse-b', agent: ['true'] },
  ],
}).lanes;
const TOKEN_A = 'sse-token-alpha';
const TOKEN_B = 'sse-token-beta';
const bearer = (token: string) => ({ authorization: `Bearer ${token}` });

interface RunningApi {
  server: ApiServer;
  port: number;
  /** Every socket the API accepted, to read what it buffers for each client. */
  sockets: Set<Socket>;
  stop(): Promise<void>;
}

describe('GET /v1/events: one Redis reader per process, caps, slow consumers', () => {
  const f = useRedis();
  const running: RunningApi[] = [];
  const clients: RawSseClient[] = [];

  afterEach(async () => {
    for (const c of clients.splice(0)) c.close();
    for (const a of running.splice(0)) await a.stop();
  });

  /** A real API on the fixture's Redis, listening on a free port, as `lanes up` builds it. */
  async function startApi(options: Partial<ApiOptions> = {}): Promise<RunningApi> {
    const redis = createRedis(f.redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    const server = await createApiServer({ redis, lanes: LANES, log: testLog(), ...options });
    const sockets = new Set<Socket>();
    server.app.server.on('connection', (s: Socket) => sockets.add(s));
    await server.app.listen({ port: 0, host: '127.0.0.1' });
    const address = server.app.server.address();
    const api: RunningApi = {
      server,
      port: typeof address === 'object' && address ? address.port : 0,
      sockets,
      async stop() {
        await server.close();
        redis.disconnect();
      },
    };
    running.push(api);
    return api;
  }

  async function open(api: RunningApi, path: string, headers: Record<string, string> = {}, options: { read?: boolean } = {}): Promise<RawSseClient> {
    const c = await RawSseClient.open(api.port, path, headers, options);
    clients.push(c);
    return c;
  }

  const redisClients = async (conn: Redis) => ((await conn.client('LIST')) as string).trim().split('\n').length;

  const event = (lane: string, n: number, pad = ''): LaneEvent => ({
    type: 'card.queued',
    at: new Date().toISOString(),
    lane,
    cardId: `c-${n}`,
    ...(pad ? { data: { pad } } : {}),
  });

  /** Appends `count` events in one round trip. */
  async function publish(lane: string, from: number, count: number, pad = ''): Promise<void> {
    const log = new EventLog(f.conn);
    const multi = f.conn.multi();
    for (let i = 0; i < count; i++) log.appendTo(multi, event(lane, from + i, pad));
    await multi.exec();
  }

  /** Every id in the stream after `afterId`, as Redis holds them: what a gapless stream must deliver. */
  async function idsAfter(afterId: string): Promise<string[]> {
    const entries = (await f.conn.xrange('lanes-store:events', `(${afterId}`, '+')) as Array<[string, string[]]>;
    return entries.map(([id]) => id);
  }

  it('serves 500 streams on one Redis connection of its own, and refuses the 501st with 429 TOO_MANY_STREAMS', async () => {
    const api = await startApi({ tokens: [TOKEN_A], events: { caps: { maxStreamsTotal: 500, maxStreamsPerPrincipal: 500 } } });
    const before = await redisClients(f.conn);
    const first = await open(api, '/v1/events', bearer(TOKEN_A));
    await waitFor('the first stream to open', () => first.status === 200 && first.lastId());
    const withReader = await redisClients(f.conn);
    expect(withReader - before).toBe(1); // the fan-out's blocking connection, opened with the first stream

    for (let batch = 0; batch < 499; batch += 50) {
      await Promise.all(Array.from({ length: Math.min(50, 499 - batch) }, () => open(api, '/v1/events', bearer(TOKEN_A))));
    }
    await waitFor('500 streams open', () => api.server.events.open() === 500 && clients.every((c) => c.status === 200));
    expect(await redisClients(f.conn)).toBe(withReader);

    const refused = await fetch(`http://127.0.0.1:${api.port}/v1/events`, { headers: bearer(TOKEN_A) });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { code: string } }).error.code).toBe('TOO_MANY_STREAMS');

    // One read feeds them all.
    await publish('sse-a', 0, 3);
    const [last] = (await f.conn.xrevrange('lanes-store:events', '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    await waitFor('every stream to get the 3 events', () => clients.every((c) => c.eventIds().at(-1) === last![0]));
    expect(await redisClients(f.conn)).toBe(withReader);

    // A closed stream frees its place.
    for (const c of clients.slice(0, 10)) c.close();
    await waitFor('10 places freed', () => api.server.events.open() === 490);
    const again = await open(api, '/v1/events', bearer(TOKEN_A));
    await waitFor('a new stream to open', () => again.status === 200);
  });

  it('caps streams per token (bearer or Basic alike) and in total', async () => {
    const api = await startApi({ tokens: [TOKEN_A, TOKEN_B], events: { caps: { maxStreamsPerPrincipal: 2, maxStreamsTotal: 3 } } });
    const status = async (headers: Record<string, string>) => {
      const res = await fetch(`http://127.0.0.1:${api.port}/v1/events`, { headers });
      const code = res.status === 200 ? undefined : ((await res.json()) as { error: { code: string; message: string } }).error;
      if (res.status === 200) await res.body?.cancel();
      return { status: res.status, code: code?.code, message: code?.message };
    };
    const a1 = await open(api, '/v1/events', bearer(TOKEN_A));
    await open(api, '/v1/events', bearer(TOKEN_A));
    await waitFor('two streams of token A', () => api.server.events.open() === 2);
    expect(await status(bearer(TOKEN_A))).toMatchObject({ status: 429, code: 'TOO_MANY_STREAMS', message: expect.stringContaining('this token') });
    const basicA = `Basic ${Buffer.from(`ops:${TOKEN_A}`).toString('base64')}`;
    expect(await status({ authorization: basicA })).toMatchObject({ status: 429, code: 'TOO_MANY_STREAMS' });

    await open(api, '/v1/events', bearer(TOKEN_B));
    await waitFor('three streams', () => api.server.events.open() === 3);
    expect(await status(bearer(TOKEN_B))).toMatchObject({ status: 429, code: 'TOO_MANY_STREAMS', message: expect.stringContaining('this server') });

    a1.close();
    await waitFor("token A's first stream to be let go", () => api.server.events.open() === 2);
    const b2 = await open(api, '/v1/events', bearer(TOKEN_B));
    await waitFor("token B's second stream", () => b2.status === 200);
  });

  it.each([
    ['?since=nope', {}, 'since'],
    ['?since=$', {}, 'since'],
    ['?since=1700000000000', {}, 'since'],
    ['?since=18446744073709551616-0', {}, 'since'],
    ['', { 'last-event-id': 'garbage' }, 'last-event-id'],
    ['?lane=a:b', {}, 'lane'],
  ])('refuses %s %j with 400 QUERY_INVALID naming %s, and counts no stream', async (query, headers, field) => {
    const api = await startApi();
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/events${query}`, { headers });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { error: { code: string; issues: Array<{ path: string }> } };
    expect(body.error.code).toBe('QUERY_INVALID');
    expect(body.error.issues.map((i) => i.path)).toEqual([field]);
    expect(api.server.events.open()).toBe(0);
  });

  it('resumes across the catch-up/live seam with no gap and no repeat while events keep arriving', async () => {
    const api = await startApi();
    await publish('sse-a', 0, 1_000);
    const backlog = await idsAfter('0-0');
    let publishing = true;
    const publisher = (async () => {
      for (let n = 1_000; n < 4_000; n += 20) await publish(n % 40 === 0 ? 'sse-a' : 'sse-b', n, 20);
      publishing = false;
    })();
    // Streams that start at different depths of the backlog, opened while the publisher runs.
    const resumed: Array<{ since: string; client: RawSseClient }> = [];
    for (const [i, since] of [backlog[0]!, backlog[250]!, backlog[900]!, backlog[999]!].entries()) {
      const headers: Record<string, string> = i % 2 ? { 'last-event-id': since } : {};
      const client = await open(api, i % 2 ? '/v1/events' : `/v1/events?since=${since}`, headers);
      resumed.push({ since, client });
    }
    await publisher;
    expect(publishing).toBe(false);
    const tail = ((await f.conn.xrevrange('lanes-store:events', '+', '-', 'COUNT', 1)) as Array<[string, string[]]>)[0]?.[0];
    for (const { since, client } of resumed) {
      await waitFor(`the stream resumed after ${since} to reach the tail`, () => client.eventIds().at(-1) === tail);
      const got = client.eventIds();
      const expected = await idsAfter(since);
      expect(got.length).toBe(expected.length);
      expect(new Set(got).size).toBe(got.length);
      expect(got).toEqual(expected);
    }
  });

  it('drops a client that stops reading, with a bounded buffer and a resumable id, and the reconnect misses nothing', async () => {
    const maxBufferedBytes = 64 * 1024;
    const api = await startApi({ events: { stream: { maxBufferedBytes, endGraceMs: 1_500 } } });
    // What the API holds unsent for each client, after every write to its socket.
    let maxBuffered = 0;
    api.server.app.server.on('connection', (s: Socket) => {
      const write = s.write.bind(s) as (...args: unknown[]) => boolean;
      s.write = ((...args: unknown[]) => {
        const ok = write(...args);
        maxBuffered = Math.max(maxBuffered, s.writableLength);
        return ok;
      }) as Socket['write'];
    });
    const reader = await open(api, '/v1/events'); // keeps up: never dropped
    const late = await open(api, '/v1/events', {}, { read: false }); // reads again once dropped: gets the last frame
    const never = await open(api, '/v1/events', {}, { read: false }); // never reads until the server has closed it
    await waitFor('three streams open', () => api.server.events.open() === 3);
    const start = reader.lastId()!;

    // Batches of ~20 KiB while the stalled clients' kernel buffers fill, then their API-side buffers.
    const pad = 'x'.repeat(1_000);
    let published = 0;
    while (published < 20_000 && api.server.events.dropped() < 2) {
      await publish('sse-a', published, 20, pad);
      published += 20;
    }
    await waitFor('both stalled streams dropped', () => api.server.events.dropped() === 2);
    // A buffer growing with what is published would hold it all: it stays within the cap, one frame and the last frame.
    expect(maxBuffered).toBeGreaterThan(0);
    expect(maxBuffered).toBeLessThanOrEqual(maxBufferedBytes + 1_500);
    expect(published * 1_000).toBeGreaterThan(4 * maxBufferedBytes);

    late.resume();
    await waitFor('the late reader to read to the end', () => late.ended);
    expect(late.text).toMatch(/: dropped: the client read too slowly; reconnect with Last-Event-ID\nid: \d+-\d+\n\n$/);
    // The last frame names the last event sent, so resuming there repeats nothing.
    expect(late.lastId()).toBe(late.eventIds().at(-1));

    // The one that never reads is closed by the server all the same: flushed, or destroyed after the grace.
    await waitFor('the never-reading stream to be closed', () => api.server.events.open() === 1, { timeoutMs: 10_000 });
    never.resume();
    await waitFor('the never-reading client to see the close', () => never.closed);

    await publish('sse-a', 100_000, 5); // more after the drop: the reconnect must get them too
    const all = await idsAfter(start);
    await waitFor('the reader to get every event', () => reader.eventIds().at(-1) === all.at(-1));
    expect(reader.eventIds()).toEqual(all);
    expect(api.server.events.open()).toBe(1);
    const metrics = await (await fetch(`http://127.0.0.1:${api.port}/metrics`)).text();
    expect(metrics).toMatch(/^lanes_sse_streams 1$/m);
    expect(metrics).toMatch(/^lanes_sse_dropped_total 2$/m);
    for (const c of [late, never]) {
      const resumeId = c.lastId() ?? start;
      const again = await open(api, '/v1/events', { 'last-event-id': resumeId });
      await waitFor(`the reconnect after ${resumeId} to reach the tail`, () => again.eventIds().at(-1) === all.at(-1));
      expect([...c.eventIds(), ...again.eventIds()]).toEqual(all);
      again.close();
    }
  });

  it('keeps an idle stream alive with comment lines', async () => {
    const api = await startApi({ events: { stream: { keepaliveMs: 50 } } });
    const c = await open(api, '/v1/events');
    await waitFor('two keepalive comments', () => c.text.split(': keepalive\n\n').length > 2);
  });

  it('filters to the lanes laneFilter allows and caps by the principal principalOf names', async () => {
    const api = await startApi({
      events: {
        caps: { maxStreamsPerPrincipal: 1 },
        principalOf: (r) => String(r.headers['x-board'] ?? 'none'),
        laneFilter: (r) => (lane) => r.headers['x-board'] === 'board-a' && lane === 'sse-a',
      },
    });
    const [[start = '0-0'] = []] = (await f.conn.xrevrange('lanes-store:events', '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    const a = await open(api, `/v1/events?since=${start}`, { 'x-board': 'board-a' });
    const refused = await fetch(`http://127.0.0.1:${api.port}/v1/events`, { headers: { 'x-board': 'board-a' } });
    expect(refused.status).toBe(429);
    await refused.body?.cancel();
    const b = await open(api, `/v1/events?since=${start}`, { 'x-board': 'board-b' });
    await waitFor('both streams open', () => a.status === 200 && b.status === 200);
    await publish('sse-b', 0, 2);
    await publish('sse-a', 2, 2);
    const idsA = (await f.conn.xrange('lanes-store:events', `(${start}`, '+')).filter(([, fields]) => fields[1]!.includes('"lane":"sse-a"')).map(([id]) => id);
    await waitFor("board A's events", () => a.eventIds().length === idsA.length);
    expect(a.eventIds()).toEqual(idsA);
    // The last frame read moved board B's resume point past what it may not see, but sent it nothing.
    expect(b.eventIds()).toEqual([]);
  });

  it('a lane token resumes past another lane’s burst that trimmed the shared stream, with no gap: its lane’s own stream holds it', async () => {
    const SCOPED = 'sse-token-lane-a-only';
    const api = await startApi({ scopedTokens: [{ name: 'board-a', fromEnv: 'BOARD_A', lanes: ['sse-a'], role: 'read' }], tokenEnv: { BOARD_A: SCOPED }, tokens: [TOKEN_A] });
    await publish('sse-a', 0, 1);
    const [[resumeAt = '0-0'] = []] = (await f.conn.xrevrange('lanes-store:events', '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    await publish('sse-a', 1, 2);
    await publish('sse-b', 3, 300);
    // As MAXLEN does past EVENT_STREAM_MAX_LEN: the shared stream keeps its newest 100, all of sse-b.
    await f.conn.xtrim('lanes-store:events', 'MAXLEN', 100);
    const laneA = ((await f.conn.xrange('lanes-store:lane:sse-a:events', `(${resumeAt}`, '+')) as Array<[string, string[]]>).map(([id]) => id);
    expect(laneA).toHaveLength(2);
    const board = await open(api, '/v1/events', { ...bearer(SCOPED), 'last-event-id': resumeAt });
    await waitFor("board A's two events", () => board.eventIds().length === 2);
    expect(board.eventIds()).toEqual(laneA);
    expect(board.text).not.toContain('event: gap');
    // The operator's admin token, over every lane, is told of the gap in the shared stream.
    const admin = await open(api, '/v1/events', { ...bearer(TOKEN_A), 'last-event-id': resumeAt });
    await waitFor('the admin stream’s gap', () => admin.text.includes('event: gap'));
  });

  it('ends every stream with its resume id on close, and its Redis reader with it', async () => {
    const before = await redisClients(f.conn);
    const api = await startApi();
    const c = await open(api, '/v1/events');
    await waitFor('the stream open', () => c.status === 200 && c.lastId());
    await publish('sse-a', 0, 1);
    await waitFor('the event', () => c.eventIds().length === 1);
    await api.stop();
    running.splice(running.indexOf(api), 1);
    await waitFor('the stream to end', () => c.ended);
    expect(c.text).toMatch(/: the server is closing; reconnect with Last-Event-ID\nid: (\d+-\d+)\n\n$/);
    expect(c.lastId()).toBe(c.eventIds()[0]);
    await waitFor('the API and its reader to leave Redis', async () => (await redisClients(f.conn)) === before);
  });
});
