import { createServer, type Server } from 'node:http';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule, type Card } from '@lanes/contracts';
import { CardStore, EventLog, keys } from '@lanes/queue';
import { CALLBACK_GROUP, CallbackDispatcher } from '@lanes/supervisor';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** A dead supervisor's pending callbacks are taken over by a live one, on a real Redis consumer group. */
describe('callback takeover', () => {
  let redis: TestRedis;
  let conn: Redis;
  let board: Server;
  let boardUrl: string;
  const received: Array<{ event: string; cardId: string }> = [];

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url);
    board = createServer((req, res) => {
      let raw = '';
      req.on('data', (c: Buffer) => (raw += c.toString()));
      req.on('end', () => {
        const body = JSON.parse(raw) as { event: string; card: { id: string } };
        received.push({ event: body.event, cardId: body.card.id });
        res.end();
      });
    });
    await new Promise<void>((r) => board.listen(0, '127.0.0.1', r));
    boardUrl = `http://127.0.0.1:${(board.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    board?.close();
    conn?.disconnect();
    await redis?.stop();
  });

  it('an entry a dead supervisor read but never acknowledged is delivered by the next one, then acknowledged', async () => {
    const store = new CardStore({ redis: conn, events: new EventLog(conn), now: Date.now });
    const card: Card = { id: 'orphaned-callback', lane: 'cb', title: 'told late', priority: 0, callbackUrl: `${boardUrl}/hook` };
    await store.create(card);
    await conn.xgroup('CREATE', keys.callbacks(), CALLBACK_GROUP, '$', 'MKSTREAM');
    await conn.xadd(keys.callbacks(), '*', 'e', JSON.stringify({ type: 'card.done', at: new Date().toISOString(), lane: 'cb', cardId: card.id }));
    // The dead supervisor: it read the entry, then died before delivering or acknowledging it.
    const read = (await conn.xreadgroup('GROUP', CALLBACK_GROUP, 'dead-supervisor', 'COUNT', 10, 'STREAMS', keys.callbacks(), '>')) as Array<[string, unknown[]]> | null;
    expect(read?.[0]?.[1]).toHaveLength(1);
    expect(((await conn.xpending(keys.callbacks(), CALLBACK_GROUP)) as [number])[0]).toBe(1);

    const heirConn = new Redis(redis.url);
    heirConn.on('error', () => undefined);
    const heir = new CallbackDispatcher({
      redis: heirConn,
      store,
      log: pino({ level: 'silent' }),
      consumer: 'heir',
      allow: [parseAllowRule('127.0.0.1') as CallbackAllowRule],
      claimIdleMs: 200,
      retry: { maxAttempts: 3, baseDelayMs: 20 },
    });
    await heir.start();
    try {
      await waitFor('the taken-over callback', () => received.find((r) => r.cardId === card.id));
      expect(received.filter((r) => r.cardId === card.id)).toEqual([{ event: 'card.done', cardId: card.id }]);
      await waitFor('nothing pending any more', async () => ((await conn.xpending(keys.callbacks(), CALLBACK_GROUP)) as [number])[0] === 0);
    } finally {
      await heir.stop();
    }
  });
});
