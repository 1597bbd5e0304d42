import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { CardRecord } from '@lanes/contracts';
import { signBody } from '@lanes/supervisor';
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
function board(): Promise<{ server: Server; url: string; received: Received[] }> {
  const received: Received[] = [];
  let flakyCalls = 0;
  const read = (req: IncomingMessage) => new Promise<string>((resolve) => {
    let data = '';
    req.on('data', (c: Buffer) => (data += c.toString()));
    req.on('end', () => resolve(data));
  });
  const server = createServer((req, res) => {
    void read(req).then((raw) => {
      if (req.url === '/flaky' && ++flakyCalls <= 2) res.statusCode = 503;
      if (req.url === '/gone') res.statusCode = 410;
      received.push({ path: req.url ?? '', status: res.statusCode, event: String(req.headers['x-lanes-event']), signature: req.headers['x-lanes-signature'] as string | undefined, raw, body: JSON.parse(raw) });
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, received })));
}

describe('card callbacks', () => {
  let redis: TestRedis;
  let t: TestStack;
  let b: Awaited<ReturnType<typeof board>>;

  beforeAll(async () => {
    redis = await startRedis();
    b = await board();
    t = await startTestStack(redis.url, [{ name: 'cb', slots: 1, agent: [process.execPath, DEMO_AGENT], attempts: 1 }], {
      // Five tries: a delivery that stops at the third is the board's 200, not the retry limit.
      callbacks: { secret: SECRET, retry: { maxAttempts: 5, baseDelayMs: 50 } },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    b?.server.close();
  });

  it('POSTs the finished card, signed, to its callbackUrl', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-1', lane: 'cb', title: 'tell me', callbackUrl: `${b.url}/hook` });
    await t.api.waitCard('cb-1', 'done', (c) => c.state === 'done');
    const hit = await waitFor('the callback', () => b.received.find((r) => r.body.card.id === 'cb-1'));
    expect(hit.path).toBe('/hook');
    expect(hit.event).toBe('card.done');
    expect(hit.body.card.state).toBe('done');
    expect(hit.body.card.result).toMatchObject({ branch: 'lanes/cb-1' });
    expect(hit.signature).toBe(signBody(SECRET, hit.raw));
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
});
