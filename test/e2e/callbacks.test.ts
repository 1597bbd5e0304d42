import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { parseAllowRule, type CallbackAllowRule, type CardRecord } from '@lanes/contracts';
import { keys } from '@lanes/queue';
import { DEFAULT_CALLBACK_CONCURRENCY, systemLookup, type CallbackLookup } from '@lanes/supervisor';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

interface Received {
  path: string;
  /** The status the board answered with. */
  status: number;
  event: string;
  signature: string | undefined;
  /** x-lanes-delivery. */
  delivery: string | undefined;
  /** Date.now() when the request ended at the board. */
  receivedAt: number;
  raw: string;
  body: { event: string; at: string; deliveryId: string; card: CardRecord };
}

/** The stack signs with SECRET and, as during a rotation, with PREVIOUS_SECRET too. */
const SECRET = 'callback-secret-for-tests';
const PREVIOUS_SECRET = 'callback-secret-rotated-out';
/** Lane `cb-own`'s own secret and, as during its rotation, its old one, read from the variables its config names. */
const OWN_SECRET = 'lane-own-callback-secret';
const OWN_PREVIOUS = 'lane-own-callback-secret-old';

/** A board on loopback: records every callback; `/flaky` answers 503 twice before accepting, `/gone` always 410. */
function board(host = '127.0.0.1'): Promise<{ server: Server; url: string; port: number; received: Received[] }> {
  const received: Received[] = [];
  let flakyCalls = 0;
  const read = (req: IncomingMessage) =>
    new Promise<string>((resolve) => {
      let data = '';
      req.on('data', (c: Buffer) => (data += c.toString()));
      req.on('end', () => resolve(data));
    });
  const server = createServer((req, res) => {
    void read(req).then((raw) => {
      if (req.url === '/flaky' && ++flakyCalls <= 2) res.statusCode = 503;
      if (req.url === '/gone') res.statusCode = 410;
      received.push({
        path: req.url ?? '',
        status: res.statusCode,
        event: String(req.headers['x-lanes-event']),
        signature: req.headers['x-lanes-signature'] as string | undefined,
        delivery: req.headers['x-lanes-delivery'] as string | undefined,
        receivedAt: Date.now(),
        raw,
        body: JSON.parse(raw),
      });
      res.end();
    });
  });
  return new Promise((resolve) =>
    server.listen(0, host, () => {
      const port = (server.address() as { port: number }).port;
      resolve({ server, url: `http://${host}:${port}`, port, received });
    }),
  );
}

/** The boards here are on loopback, so the stack allows exactly 127.0.0.1; every other inward address stays refused. */
const ALLOW = [parseAllowRule('127.0.0.1') as CallbackAllowRule];
/** A name that resolves inward, to an address not allowed, where a second board listens: reached only if the check fails. */
const INWARD_HOST = 'inward-board.test';
const lookup: CallbackLookup = async (host) => (host === INWARD_HOST ? [{ address: '127.0.0.2', family: 4 }] : systemLookup(host));

/** The receiver side of the signature, as the README shows it: any `v1` made with the receiver's one secret. */
function verify(secret: string, header: string | undefined, raw: string): { ok: boolean; t: number } {
  const parts = (header ?? '').split(',').map((p) => p.split('=') as [string, string]);
  const t = parts.find(([k]) => k === 't')?.[1];
  const expected = createHmac('sha256', secret).update(`${t}.${raw}`).digest('hex');
  return { ok: parts.some(([k, v]) => k === 'v1' && v === expected), t: Number(t) };
}

/** A host that accepts connections and never answers: every delivery to it waits out its timeout. */
function blackhole(): Promise<{ url: string; sockets: Set<Socket>; close(): void }> {
  const sockets = new Set<Socket>();
  const server = createTcpServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.resume();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({
        url: `http://127.0.0.1:${(server.address() as { port: number }).port}`,
        sockets,
        close: () => {
          for (const s of sockets) s.destroy();
          server.close();
        },
      }),
    ),
  );
}

describe('card callbacks', () => {
  let redis: TestRedis;
  let t: TestStack;
  let b: Awaited<ReturnType<typeof board>>;
  let inward: Awaited<ReturnType<typeof board>>;
  let hole: Awaited<ReturnType<typeof blackhole>>;
  let conn: Redis;
  const logLines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    redis = await startRedis();
    b = await board();
    inward = await board('127.0.0.2');
    hole = await blackhole();
    conn = new Redis(redis.url);
    const log = pino({ level: 'warn' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
    const agent = [process.execPath, DEMO_AGENT];
    const lanes = [
      { name: 'cb', slots: 1, agent, attempts: 1 },
      { name: 'cb-own', slots: 1, agent, attempts: 1, callbackSecret: { fromEnv: 'CB_OWN_SECRET', previousFromEnv: 'CB_OWN_OLD' } },
    ];
    t = await startTestStack(redis.url, lanes, {
      tokenEnv: { CB_OWN_SECRET: OWN_SECRET, CB_OWN_OLD: OWN_PREVIOUS },
      // Five tries: a delivery that stops at the third is the board's 200, not the retry limit.
      callbacks: { secret: SECRET, previousSecret: PREVIOUS_SECRET, retry: { maxAttempts: 5, baseDelayMs: 50 }, lookup },
      callbackAllow: ALLOW,
      log,
    });
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    hole?.close();
    await redis?.stop();
    b?.server.close();
    inward?.server.close();
  });

  it('POSTs the finished card with its delivery id, signed with a timestamp by both secrets of a rotation, to its callbackUrl', async () => {
    const before = Math.floor(Date.now() / 1000);
    await t.api.request('POST', '/v1/cards', { id: 'cb-1', lane: 'cb', title: 'tell me', callbackUrl: `${b.url}/hook` });
    await t.api.waitCard('cb-1', 'done', (c) => c.state === 'done');
    const hit = await waitFor('the callback', () => b.received.find((r) => r.body.card.id === 'cb-1'));
    expect(hit.path).toBe('/hook');
    expect(hit.event).toBe('card.done');
    expect(hit.body.card.state).toBe('done');
    expect(hit.body.card.result).toMatchObject({ branch: 'lanes/cb-1' });
    expect(hit.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    // The delivery id is the callback stream entry's, in the header and in the signed body.
    expect(hit.delivery).toMatch(/^\d+-\d+$/);
    expect(hit.body.deliveryId).toBe(hit.delivery);
    const signed = verify(SECRET, hit.signature, hit.raw);
    expect(signed.ok).toBe(true);
    // A board that still holds only the previous secret verifies during the rotation; any other secret does not.
    expect(verify(PREVIOUS_SECRET, hit.signature, hit.raw).ok).toBe(true);
    expect(verify('callback-secret-never-issued', hit.signature, hit.raw).ok).toBe(false);
    expect(signed.t).toBeGreaterThanOrEqual(before);
    expect(signed.t).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    // The timestamp is part of what is signed: the same body under another time does not verify.
    expect(verify(SECRET, hit.signature!.replace(/^t=\d+/, `t=${signed.t - 600}`), hit.raw).ok).toBe(false);
    expect(b.received.filter((r) => r.body.card.id === 'cb-1')).toHaveLength(1);
  });

  it("signs a lane's cards with that lane's own secret (and its rotation's old one) alone: the stack's secret does not verify them", async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-own-1', lane: 'cb-own', title: 'mine', callbackUrl: `${b.url}/own` });
    await t.api.waitCard('cb-own-1', 'done', (c) => c.state === 'done');
    const hit = await waitFor('the callback', () => b.received.find((r) => r.body.card.id === 'cb-own-1'));
    expect(hit.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/);
    expect(verify(OWN_SECRET, hit.signature, hit.raw).ok).toBe(true);
    expect(verify(OWN_PREVIOUS, hit.signature, hit.raw).ok).toBe(true);
    // A board of another lane holds the stack's secret: it can neither verify nor forge this lane's deliveries.
    expect(verify(SECRET, hit.signature, hit.raw).ok).toBe(false);
    expect(verify(PREVIOUS_SECRET, hit.signature, hit.raw).ok).toBe(false);
  });

  /**
   * Every delivery has ended: the callback stream is trimmed only past acknowledged entries, and
   * an entry is acknowledged when its delivery ends (delivered, refused or given up), so an empty
   * stream means none is still being tried.
   */
  async function afterDeliveriesSettle() {
    await waitFor('every callback delivery ended', async () => (await conn.xlen(keys.callbacks())) === 0);
  }

  it('retries a board that is briefly down, and delivers once it answers', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-2', lane: 'cb', title: 'flaky board', callbackUrl: `${b.url}/flaky`, metadata: { fail: 'on purpose' } });
    await t.api.waitCard('cb-2', 'failed', (c) => c.state === 'failed');
    await waitFor('the accepted delivery', () => b.received.some((r) => r.body.card.id === 'cb-2' && r.status === 200));
    await afterDeliveriesSettle();
    const tries = b.received.filter((r) => r.body.card.id === 'cb-2');
    // Two refusals, then the delivery the board accepted, and nothing after it.
    expect(tries.map((r) => r.status)).toEqual([503, 503, 200]);
    expect(tries.every((r) => r.event === 'card.failed')).toBe(true);
    // One event, one delivery id on every try: a board de-duplicates on it.
    expect(new Set(tries.map((r) => r.delivery)).size).toBe(1);
    expect(tries[0]!.delivery).toMatch(/^\d+-\d+$/);
    expect(tries.map((r) => r.body.deliveryId)).toEqual(tries.map((r) => r.delivery));
  });

  it('gives up at once on a board that answers 410 Gone', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-gone', lane: 'cb', title: 'gone board', callbackUrl: `${b.url}/gone` });
    await t.api.waitCard('cb-gone', 'done', (c) => c.state === 'done');
    await waitFor('the refused delivery', () => b.received.some((r) => r.body.card.id === 'cb-gone'));
    await afterDeliveriesSettle();
    expect(b.received.filter((r) => r.body.card.id === 'cb-gone').map((r) => r.status)).toEqual([410]);
  });

  it('tells the board when its card waits for a human, and sends nothing for cards without a callbackUrl', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-3', lane: 'cb', title: 'help', callbackUrl: `${b.url}/hook`, metadata: { needsHuman: 'pick a base' } });
    const hit = await waitFor('the blocked callback', () => b.received.find((r) => r.body.card.id === 'cb-3'));
    expect(hit.event).toBe('card.blocked');
    expect(hit.body.card.blockedReason).toBe('needs-human');

    await t.api.request('POST', '/v1/cards', { id: 'cb-4', lane: 'cb', title: 'quiet' });
    await t.api.waitCard('cb-4', 'done', (c) => c.state === 'done');
    await afterDeliveriesSettle();
    expect(b.received.some((r) => r.body.card.id === 'cb-4')).toBe(false);
  });

  it.each([
    'http://10.0.0.5/hook',
    'http://169.254.169.254/latest/meta-data',
    'http://[::1]:8080/hook',
    'http://localhost:8080/hook',
    'http://127.0.0.2/hook',
    'http://[::ffff:127.0.0.2]/hook',
    'http://[fd00:ec2::254]/hook',
  ])('refuses a card whose callbackUrl %s points inward, naming the field', async (callbackUrl) => {
    const one = await t.api.request<{ error: { code: string; issues: Array<{ path: string; message: string }> } }>('POST', '/v1/cards', {
      id: 'cb-inward',
      lane: 'cb',
      title: 'x',
      callbackUrl,
    });
    expect(one.status).toBe(400);
    expect(one.body.error.code).toBe('CARD_INVALID');
    expect(one.body.error.issues).toEqual([{ path: 'callbackUrl', message: expect.stringContaining('LANES_CALLBACK_ALLOW') }]);
    const bulk = await t.api.request<{ error: { issues: Array<{ path: string }> } }>('POST', '/v1/cards', {
      cards: [
        { id: 'cb-ok', lane: 'cb', title: 'x' },
        { id: 'cb-inward', lane: 'cb', title: 'x', callbackUrl },
      ],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.error.issues.map((i) => i.path)).toEqual(['cards.1.callbackUrl']);
    // All or nothing: the valid card in the refused batch was not taken either.
    expect((await t.api.request('GET', '/v1/cards/cb-ok')).status).toBe(404);
  });

  it('does not deliver to a hostname that resolves inward, and logs callback.refused with the address', async () => {
    await t.api
      .request('POST', '/v1/cards', { id: 'cb-dns', lane: 'cb', title: 'rebound', callbackUrl: `http://${INWARD_HOST}:${inward.port}/hook` })
      .then((r) => expect(r.status).toBe(202));
    await t.api.waitCard('cb-dns', 'done', (c) => c.state === 'done');
    const refused = await waitFor('the callback.refused log', () => logLines.find((l) => l.event === 'callback.refused' && l.cardId === 'cb-dns'));
    expect(refused).toMatchObject({ address: '127.0.0.2', lane: 'cb', type: 'card.done' });
    expect(String(refused.reason)).toContain(INWARD_HOST);
    await afterDeliveriesSettle();
    // The second board is reachable at 127.0.0.2: had the check let it through, it would have heard.
    await fetch(`${inward.url}/probe`, { method: 'POST', body: '{}' });
    expect(inward.received.map((r) => r.path)).toEqual(['/probe']);
  });

  it('a host that accepts connections and never answers delays another host by less than 2 s', async () => {
    // More deliveries to the blackhole than it may have in flight: some wait for it, none for the board.
    const held = ['cb-hole-1', 'cb-hole-2', 'cb-hole-3', 'cb-hole-4', 'cb-hole-5', 'cb-hole-6'];
    await t.api.request('POST', '/v1/cards', { cards: held.map((id) => ({ id, lane: 'cb', title: 'blackholed board', callbackUrl: `${hole.url}/hook` })) });
    for (const id of held) await t.api.waitCard(id, 'done', (c) => c.state === 'done');
    await waitFor('the blackhole holds deliveries', () => hole.sockets.size >= 4);
    await t.api.request('POST', '/v1/cards', { id: 'cb-beside-hole', lane: 'cb', title: 'board that answers', callbackUrl: `${b.url}/hook` });
    const hit = await waitFor("the other host's callback", () => b.received.find((r) => r.body.card.id === 'cb-beside-hole'));
    // From the card's end (the event's time) to the board: not behind the blackhole's 5 s timeouts.
    expect(hit.receivedAt - Date.parse(hit.body.at)).toBeLessThan(2_000);
    // The blackhole was still holding its deliveries meanwhile.
    expect(hole.sockets.size).toBeGreaterThanOrEqual(1);
  });

  it("a lane whose cards point at many blackholed hosts holds at most its lane's share; another lane's callback arrives in less than 2 s", async () => {
    const { maxInFlightPerLane } = DEFAULT_CALLBACK_CONCURRENCY;
    // 20 hosts that never answer, 4 cancelled cards each: 80 deliveries, more than the 64 in flight in all.
    const holes = await Promise.all(Array.from({ length: 20 }, () => blackhole()));
    const inFlight = () => holes.reduce((n, h) => n + h.sockets.size, hole.sockets.size);
    try {
      const cards = holes.flatMap((h, i) => [0, 1, 2, 3].map((k) => ({ id: `cb-many-${i}-${k}`, lane: 'cb', title: 'many blackholes', callbackUrl: `${h.url}/hook` })));
      await t.api.request('POST', '/v1/cards', { cards });
      for (const c of cards) await t.api.request('POST', `/v1/cards/${c.id}/cancel`);
      await waitFor("lane cb's share of deliveries held", () => inFlight() >= maxInFlightPerLane);
      await t.api.request('POST', '/v1/cards', { id: 'cb-own-beside-holes', lane: 'cb-own', title: 'another board', callbackUrl: `${b.url}/hook` });
      const hit = await waitFor("the other lane's callback", () => b.received.find((r) => r.body.card.id === 'cb-own-beside-holes'));
      expect(hit.receivedAt - Date.parse(hit.body.at)).toBeLessThan(2_000);
      expect(inFlight()).toBeLessThanOrEqual(maxInFlightPerLane);
    } finally {
      for (const h of holes) h.close();
    }
  });
});
