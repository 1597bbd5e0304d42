import { createHmac } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { parseAllowRule, type CallbackAllowRule, type CardRecord } from '@lanes/contracts';
import { systemLookup, type CallbackLookup } from '@lanes/supervisor';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

interface Received {
  path: string;
  /** The status the board answered with. */
  status: number;
  event: string;
  signature: string | undefined;
  raw: string;
  body: { event: string; card: CardRecord };
}

const SECRET = 'callback-secret-for-tests';

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

/** The receiver side of the signature, as the README shows it. */
function verify(secret: string, header: string | undefined, raw: string): { ok: boolean; t: number } {
  const parts = Object.fromEntries((header ?? '').split(',').map((p) => p.split('=') as [string, string]));
  const expected = createHmac('sha256', secret).update(`${parts.t}.${raw}`).digest('hex');
  return { ok: expected === parts.v1, t: Number(parts.t) };
}

describe('card callbacks', () => {
  let redis: TestRedis;
  let t: TestStack;
  let b: Awaited<ReturnType<typeof board>>;
  let inward: Awaited<ReturnType<typeof board>>;
  const logLines: Array<Record<string, unknown>> = [];

  beforeAll(async () => {
    redis = await startRedis();
    b = await board();
    inward = await board('127.0.0.2');
    const log = pino({ level: 'warn' }, { write: (line: string) => void logLines.push(JSON.parse(line)) });
    t = await startTestStack(redis.url, [{ name: 'cb', slots: 1, agent: [process.execPath, DEMO_AGENT], attempts: 1 }], {
      // Five tries: a delivery that stops at the third is the board's 200, not the retry limit.
      callbacks: { secret: SECRET, retry: { maxAttempts: 5, baseDelayMs: 50 }, lookup },
      callbackAllow: ALLOW,
      log,
    });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    b?.server.close();
    inward?.server.close();
  });

  it('POSTs the finished card, signed with a timestamp, to its callbackUrl', async () => {
    const before = Math.floor(Date.now() / 1000);
    await t.api.request('POST', '/v1/cards', { id: 'cb-1', lane: 'cb', title: 'tell me', callbackUrl: `${b.url}/hook` });
    await t.api.waitCard('cb-1', 'done', (c) => c.state === 'done');
    const hit = await waitFor('the callback', () => b.received.find((r) => r.body.card.id === 'cb-1'));
    expect(hit.path).toBe('/hook');
    expect(hit.event).toBe('card.done');
    expect(hit.body.card.state).toBe('done');
    expect(hit.body.card.result).toMatchObject({ branch: 'lanes/cb-1' });
    expect(hit.signature).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/);
    const signed = verify(SECRET, hit.signature, hit.raw);
    expect(signed.ok).toBe(true);
    expect(signed.t).toBeGreaterThanOrEqual(before);
    expect(signed.t).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    // The timestamp is part of what is signed: the same body under another time does not verify.
    expect(verify(SECRET, hit.signature!.replace(/^t=\d+/, `t=${signed.t - 600}`), hit.raw).ok).toBe(false);
    expect(b.received.filter((r) => r.body.card.id === 'cb-1')).toHaveLength(1);
  });

  /** The dispatcher delivers one event at a time, so a later card's callback means the earlier delivery has ended. */
  async function afterDeliveriesSettle(marker: string) {
    await t.api.request('POST', '/v1/cards', { id: marker, lane: 'cb', title: 'marker', callbackUrl: `${b.url}/hook` });
    await waitFor(`the ${marker} callback`, () => b.received.find((r) => r.body.card.id === marker));
  }

  it('retries a board that is briefly down, and delivers once it answers', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-2', lane: 'cb', title: 'flaky board', callbackUrl: `${b.url}/flaky`, metadata: { fail: 'on purpose' } });
    await t.api.waitCard('cb-2', 'failed', (c) => c.state === 'failed');
    await waitFor('the accepted delivery', () => b.received.some((r) => r.body.card.id === 'cb-2' && r.status === 200));
    await afterDeliveriesSettle('cb-2-marker');
    const tries = b.received.filter((r) => r.body.card.id === 'cb-2');
    // Two refusals, then the delivery the board accepted, and nothing after it.
    expect(tries.map((r) => r.status)).toEqual([503, 503, 200]);
    expect(tries.every((r) => r.event === 'card.failed')).toBe(true);
  });

  it('gives up at once on a board that answers 410 Gone', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-gone', lane: 'cb', title: 'gone board', callbackUrl: `${b.url}/gone` });
    await t.api.waitCard('cb-gone', 'done', (c) => c.state === 'done');
    await waitFor('the refused delivery', () => b.received.some((r) => r.body.card.id === 'cb-gone'));
    await afterDeliveriesSettle('cb-gone-marker');
    expect(b.received.filter((r) => r.body.card.id === 'cb-gone').map((r) => r.status)).toEqual([410]);
  });

  it('tells the board when its card waits for a human, and sends nothing for cards without a callbackUrl', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-3', lane: 'cb', title: 'help', callbackUrl: `${b.url}/hook`, metadata: { needsHuman: 'pick a base' } });
    const hit = await waitFor('the blocked callback', () => b.received.find((r) => r.body.card.id === 'cb-3'));
    expect(hit.event).toBe('card.blocked');
    expect(hit.body.card.blockedReason).toBe('needs-human');

    await t.api.request('POST', '/v1/cards', { id: 'cb-4', lane: 'cb', title: 'quiet' });
    await t.api.waitCard('cb-4', 'done', (c) => c.state === 'done');
    // cb-5 finishes after cb-4, so had cb-4 produced a callback it would have arrived by now.
    await t.api.request('POST', '/v1/cards', { id: 'cb-5', lane: 'cb', title: 'marker', callbackUrl: `${b.url}/hook` });
    await waitFor('the marker callback', () => b.received.find((r) => r.body.card.id === 'cb-5'));
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
    await afterDeliveriesSettle('cb-dns-marker');
    // The second board is reachable at 127.0.0.2: had the check let it through, it would have heard.
    await fetch(`${inward.url}/probe`, { method: 'POST', body: '{}' });
    expect(inward.received.map((r) => r.path)).toEqual(['/probe']);
  });
});
