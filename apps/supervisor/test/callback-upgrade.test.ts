import { Redis } from 'ioredis';
import pino from 'pino';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule, type Card } from '@lanes/contracts';
import { CardStore, EVENT_STREAM_MAX_LEN, EventLog, keys } from '@lanes/queue';
import { CALLBACK_GROUP, CallbackDispatcher, OLD_CALLBACK_STREAM, carryOldCallbacks } from '@lanes/supervisor';
import { useRedis, waitFor } from '../../../test/harness/index.js';
import { startBoardReceiver, type BoardReceiver } from './support/board-receiver.js';

type Fields = string[];
type GroupInfo = Record<string, string | number>;

/**
 * An upgrade from the version whose dispatcher read the main event stream: what its group there
 * still held is delivered once by the new dispatcher, and the group is gone. The old state is made
 * with the raw commands that version ran (XGROUP CREATE on the event stream, the card script's
 * XADD, XREADGROUP, XACK).
 */
describe('callback upgrade: the old event-stream group is carried over', () => {
  const f = useRedis();
  let board: BoardReceiver;
  const dispatchers: CallbackDispatcher[] = [];

  beforeAll(async () => {
    board = await startBoardReceiver();
  });
  beforeEach(async () => {
    await f.conn.flushall();
    board.received.length = 0;
  });
  afterEach(async () => {
    for (const d of dispatchers.splice(0)) await d.stop();
  });
  afterAll(async () => {
    await board?.close();
  });

  const store = () => new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now });
  const event = (type: string, cardId: string) => JSON.stringify({ type, at: new Date().toISOString(), lane: 'cb', cardId });
  /** What the old card script appended for every event. */
  const oldXadd = (e: string) => f.conn.xadd(OLD_CALLBACK_STREAM, 'MAXLEN', '~', EVENT_STREAM_MAX_LEN, '*', 'e', e) as Promise<string>;
  const oldRead = async (count: number): Promise<string[]> => {
    const reply = (await f.conn.xreadgroup('GROUP', CALLBACK_GROUP, 'old-supervisor', 'COUNT', count, 'STREAMS', OLD_CALLBACK_STREAM, '>')) as Array<
      [string, Array<[string, Fields]>]
    > | null;
    return (reply?.[0]?.[1] ?? []).map(([id]) => id);
  };
  const groups = async (stream: string): Promise<GroupInfo[]> => {
    const raw = (await f.conn.xinfo('GROUPS', stream)) as Array<Array<string | number>>;
    return raw.map((flat) => Object.fromEntries(Array.from({ length: flat.length / 2 }, (_, i) => [String(flat[2 * i]), flat[2 * i + 1] as string | number])));
  };
  const card = (id: string, callback = true): Card => ({ id, lane: 'cb', title: id, priority: 0, ...(callback ? { callbackUrl: `${board.url}/hook` } : {}) });
  const dispatcher = (consumer: string) => {
    const c = new Redis(f.redis.url);
    c.on('error', () => undefined);
    const d = new CallbackDispatcher({
      redis: c,
      store: store(),
      log: pino({ level: 'silent' }),
      consumer,
      allow: [parseAllowRule('127.0.0.1') as CallbackAllowRule],
      claimIdleMs: 200,
      retry: { maxAttempts: 3, baseDelayMs: 20 },
    });
    dispatchers.push(d);
    return d;
  };

  /**
   * The state an old supervisor left: `pendingA` read and never acknowledged; `acked` delivered;
   * `unreadB` (an old record, without the `callback` field), `noHook`, `notTerminal` never read;
   * `both` written after the new code started writing events, so it is on both streams.
   */
  async function oldState(): Promise<void> {
    await f.conn.xgroup('CREATE', OLD_CALLBACK_STREAM, CALLBACK_GROUP, '$', 'MKSTREAM');
    const s = store();
    for (const c of [card('acked'), card('pendingA'), card('unreadB'), card('noHook', false), card('notTerminal'), card('both')]) await s.create(c);
    await f.conn.hdel(keys.card('unreadB'), 'callback');
    await oldXadd(event('card.done', 'acked'));
    // The old dispatcher acknowledged every entry it had handled, delivered or not a callback.
    await f.conn.xack(OLD_CALLBACK_STREAM, CALLBACK_GROUP, ...(await oldRead(100)));
    await oldXadd(event('card.failed', 'pendingA'));
    expect(await oldRead(100)).toHaveLength(1);
    await oldXadd(event('card.done', 'unreadB'));
    await oldXadd(event('card.done', 'noHook'));
    await oldXadd(event('card.running', 'notTerminal'));
    // The new card script writes an event to both streams.
    const both = event('card.cancelled', 'both');
    await oldXadd(both);
    await f.conn.xadd(keys.callbacks(), '*', 'e', both);
    expect(((await f.conn.xpending(OLD_CALLBACK_STREAM, CALLBACK_GROUP)) as [number])[0]).toBe(1);
  }

  /** Entries ever put on the callback stream (XLEN counts only what is not trimmed yet). */
  const added = async (): Promise<number> => {
    const flat = (await f.conn.xinfo('STREAM', keys.callbacks())) as Array<string | number>;
    return Number(flat[flat.indexOf('entries-added') + 1]);
  };
  /** Every entry of the new group read and acknowledged, so trimmed away: nothing more can be delivered. */
  const settled = async () => {
    const g = (await groups(keys.callbacks())).find((x) => x.name === CALLBACK_GROUP);
    return (await added()) > 0 && g !== undefined && g.pending === 0 && (await f.conn.xlen(keys.callbacks())) === 0;
  };

  it('pending and unread callbacks of the old group are delivered once each by the new dispatcher; the old group is gone', async () => {
    await oldState();
    await dispatcher('new-supervisor').start();
    await waitFor('the carried callbacks', () => board.received.length >= 3);
    await waitFor('the new group has read and acknowledged everything', settled);
    expect(board.received.map((r) => `${r.event} ${r.cardId}`).sort()).toEqual(['card.cancelled both', 'card.done unreadB', 'card.failed pendingA']);
    expect((await groups(OLD_CALLBACK_STREAM)).map((g) => g.name)).not.toContain(CALLBACK_GROUP);
  });

  it('two supervisors starting at once carry everything exactly once', async () => {
    await oldState();
    await Promise.all([dispatcher('one').start(), dispatcher('two').start()]);
    await waitFor('the carried callbacks', () => board.received.length >= 3);
    await waitFor('the new group has read and acknowledged everything', settled);
    expect(board.received.map((r) => `${r.event} ${r.cardId}`).sort()).toEqual(['card.cancelled both', 'card.done unreadB', 'card.failed pendingA']);
    // Two events carried plus the one already there: nothing was put on the callback stream twice.
    expect(await added()).toBe(3);
  });

  it('the carry runs once: a second call finds no group and adds nothing; no old stream or group is no work', async () => {
    expect(await carryOldCallbacks(f.conn, CALLBACK_GROUP)).toEqual({ found: false, pending: 0, unread: 0 });
    await oldState();
    const other = new Redis(f.redis.url);
    const [first, second] = await Promise.all([carryOldCallbacks(f.conn, CALLBACK_GROUP), carryOldCallbacks(other, CALLBACK_GROUP)]).finally(() => other.disconnect());
    expect([first, second]).toContainEqual({ found: true, pending: 1, unread: 1 });
    expect([first, second]).toContainEqual({ found: false, pending: 0, unread: 0 });
    expect(await f.conn.xlen(keys.callbacks())).toBe(3);
    expect(await groups(OLD_CALLBACK_STREAM)).toEqual([]);
  });
});
