import { createHmac } from 'node:crypto';
import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule, type Card } from '@lanes/contracts';
import { CardStore, EventLog, keys } from '@lanes/queue';
import { CallbackDispatcher, signBody, signatureHeader } from '@lanes/supervisor';
import { useRedis, waitFor } from '../../../test/harness/index.js';
import { startBoardReceiver, type BoardReceiver } from './support/board-receiver.js';

/** Entries of the callback stream that owe no board anything are acknowledged, and never block the ones that do. */
describe('callback entries owed to nobody', () => {
  const f = useRedis();
  let board: BoardReceiver;

  beforeAll(async () => {
    board = await startBoardReceiver();
  });
  afterAll(async () => {
    await board?.close();
  });

  it('an entry that does not decode, one whose card is gone, and one whose card has no callbackUrl are acknowledged undelivered; the owed one arrives', async () => {
    const conn = new Redis(f.redis.url);
    conn.on('error', () => undefined);
    const store = new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now });
    const dispatcher = new CallbackDispatcher({
      redis: conn,
      store,
      log: pino({ level: 'silent' }),
      consumer: 'unowed',
      allow: [parseAllowRule('127.0.0.1') as CallbackAllowRule],
      retry: { maxAttempts: 2, baseDelayMs: 20 },
    });
    await dispatcher.start();
    try {
      await f.conn.xadd(keys.callbacks(), '*', 'e', '{not json');
      await f.conn.xadd(keys.callbacks(), '*', 'e', JSON.stringify({ type: 'card.done', at: new Date().toISOString(), lane: 'cb', cardId: 'never-stored' }));
      const silent: Card = { id: 'no-url', lane: 'cb', title: 'nobody to tell', priority: 0 };
      const owed: Card = { id: 'owed', lane: 'cb', title: 'a board waits', priority: 0, callbackUrl: `${board.url}/hook` };
      await store.createMany([silent, owed]);
      await f.conn.xadd(keys.callbacks(), '*', 'e', JSON.stringify({ type: 'card.done', at: new Date().toISOString(), lane: 'cb', cardId: silent.id }));
      await store.transition(owed, { to: 'cancelled', attempt: 0, message: 'cancelled' }, { kind: 'board' });
      await waitFor('the owed callback', () => board.received.length === 1);
      await waitFor('every entry acknowledged and trimmed', async () => (await f.conn.xlen(keys.callbacks())) === 0);
      expect(board.received).toEqual([{ event: 'card.cancelled', cardId: 'owed' }]);
    } finally {
      await dispatcher.stop();
      conn.disconnect();
    }
  });

  it('signBody signs "<t>.<body>" with the one secret, as signatureHeader does with a list of one', () => {
    const body = '{"event":"card.done"}';
    const v1 = createHmac('sha256', 's3cret').update(`1700000000.${body}`).digest('hex');
    expect(signBody('s3cret', body, 1_700_000_000)).toBe(`t=1700000000,v1=${v1}`);
    expect(signatureHeader(['s3cret'], body, 1_700_000_000)).toBe(signBody('s3cret', body, 1_700_000_000));
  });
});
