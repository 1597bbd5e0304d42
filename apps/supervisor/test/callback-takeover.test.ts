import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule, type Card } from '@lanes/contracts';
import { CardStore, EventLog, keys } from '@lanes/queue';
import { CALLBACK_GROUP, CallbackDispatcher } from '@lanes/supervisor';
import { useRedis, waitFor } from '../../../test/harness/index.js';
import { startBoardReceiver, type BoardReceiver } from './support/board-receiver.js';

/** A dead supervisor's pending callbacks are taken over by a live one, on a real Redis consumer group. */
describe('callback takeover', () => {
  const f = useRedis();
  let board: BoardReceiver;

  beforeAll(async () => {
    board = await startBoardReceiver();
  });
  afterAll(async () => {
    await board?.close();
  });

  it('an entry a dead supervisor read but never acknowledged is delivered by the next one, then acknowledged', async () => {
    const store = new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now });
    const card: Card = { id: 'orphaned-callback', lane: 'cb', title: 'told late', priority: 0, callbackUrl: `${board.url}/hook` };
    await store.create(card);
    await f.conn.xgroup('CREATE', keys.callbacks(), CALLBACK_GROUP, '$', 'MKSTREAM');
    await f.conn.xadd(keys.callbacks(), '*', 'e', JSON.stringify({ type: 'card.done', at: new Date().toISOString(), lane: 'cb', cardId: card.id }));
    // The dead supervisor: it read the entry, then died before delivering or acknowledging it.
    const read = (await f.conn.xreadgroup('GROUP', CALLBACK_GROUP, 'dead-supervisor', 'COUNT', 10, 'STREAMS', keys.callbacks(), '>')) as Array<[string, unknown[]]> | null;
    expect(read?.[0]?.[1]).toHaveLength(1);
    expect(((await f.conn.xpending(keys.callbacks(), CALLBACK_GROUP)) as [number])[0]).toBe(1);

    const heirConn = new Redis(f.redis.url);
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
      await waitFor('the taken-over callback', () => board.received.find((r) => r.cardId === card.id));
      expect(board.received.filter((r) => r.cardId === card.id)).toEqual([{ event: 'card.done', cardId: card.id }]);
      await waitFor('nothing pending any more', async () => ((await f.conn.xpending(keys.callbacks(), CALLBACK_GROUP)) as [number])[0] === 0);
    } finally {
      await heir.stop();
    }
  });
});
