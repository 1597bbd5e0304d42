import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule, type Card } from '@lanes/contracts';
import { CardStore, EventLog, keys } from '@lanes/queue';
import { CallbackDispatcher } from '@lanes/supervisor';
import { useRedis, waitFor } from '../../../test/harness/index.js';
import { startBoardReceiver, type BoardReceiver } from './support/board-receiver.js';

/** Past the 10,000 entries at which the callback stream used to be trimmed (MAXLEN ~ 10,000), by more than a macro node. */
const BACKLOG = 10_500;
/** Cards per write burst: the card scripts of one burst share ioredis's pipeline. */
const BURST = 500;

/** A backlog past the old trim point, built while no dispatcher runs, is delivered whole once one starts. */
describe('callback backlog', () => {
  const f = useRedis();
  let board: BoardReceiver;

  beforeAll(async () => {
    board = await startBoardReceiver();
  });
  afterAll(async () => {
    await board?.close();
  });

  const dispatcher = (consumer: string) => {
    const conn = new Redis(f.redis.url);
    conn.on('error', () => undefined);
    return new CallbackDispatcher({
      redis: conn,
      store: new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now }),
      log: pino({ level: 'silent' }),
      consumer,
      allow: [parseAllowRule('127.0.0.1') as CallbackAllowRule],
      retry: { maxAttempts: 3, baseDelayMs: 20 },
    });
  };

  it(`with the dispatcher stopped for ${BACKLOG} callbacks, every one is delivered once it restarts, and the stream is then empty`, { timeout: 120_000 }, async () => {
    // The group exists (a supervisor ran), then the dispatcher stops.
    const first = dispatcher('before-the-backlog');
    await first.start();
    await first.stop();

    const store = new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now });
    for (let from = 0; from < BACKLOG; from += BURST) {
      const cards: Card[] = Array.from({ length: Math.min(BURST, BACKLOG - from) }, (_, i) => ({
        id: `backlog-${from + i}`,
        lane: 'cb',
        title: 'told after a backlog',
        priority: 0,
        callbackUrl: `${board.url}/hook`,
      }));
      await store.createMany(cards);
      // The real card script: the move and its callback entry in one step.
      await Promise.all(cards.map((card) => store.transition(card, { to: 'cancelled', attempt: 0, message: 'cancelled' }, { kind: 'board' })));
    }
    // Nothing trimmed while nobody acknowledged anything.
    expect(await f.conn.xlen(keys.callbacks())).toBe(BACKLOG);

    const heir = dispatcher('after-the-backlog');
    await heir.start();
    try {
      await waitFor('every callback of the backlog', () => new Set(board.received.map((r) => r.cardId)).size === BACKLOG, { timeoutMs: 100_000 });
      await waitFor('every entry acknowledged and trimmed', async () => (await f.conn.xlen(keys.callbacks())) === 0);
    } finally {
      await heir.stop();
    }
    expect(board.received.every((r) => r.event === 'card.cancelled')).toBe(true);
  });
});
