import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { CardRecord } from '@lanes/contracts';
import { signBody } from '@lanes/supervisor';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

interface Received {
  path: string;
  event: string;
  signature: string | undefined;
  raw: string;
  body: { event: string; card: CardRecord };
}

const SECRET = 'callback-secret-for-tests';

/** A board on loopback: records every callback; `/flaky` answers 503 twice before accepting. */
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
      received.push({ path: req.url ?? '', event: String(req.headers['x-lanes-event']), signature: req.headers['x-lanes-signature'] as string | undefined, raw, body: JSON.parse(raw) });
      if (req.url === '/flaky' && ++flakyCalls <= 2) res.statusCode = 503;
      if (req.url === '/gone') res.statusCode = 410;
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
      callbacks: { secret: SECRET, retry: { maxAttempts: 3, baseDelayMs: 50 } },
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

  it('retries a board that is briefly down, and delivers once it answers', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cb-2', lane: 'cb', title: 'flaky board', callbackUrl: `${b.url}/flaky`, metadata: { fail: 'on purpose' } });
    await t.api.waitCard('cb-2', 'failed', (c) => c.state === 'failed');
    await waitFor('three tries', () => b.received.filter((r) => r.body.card.id === 'cb-2').length === 3);
    expect(b.received.filter((r) => r.body.card.id === 'cb-2').every((r) => r.event === 'card.failed')).toBe(true);
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
