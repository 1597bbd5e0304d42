import type { Redis } from 'ioredis';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { EventLog, EventWindow, keys } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';

describe('EventWindow on real Redis', () => {
  const f = useRedis();
  let redis: Redis;
  let log: EventLog;

  beforeAll(() => {
    redis = f.conn;
    log = new EventLog(redis);
  });
  beforeEach(async () => {
    await redis.del(keys.events());
  });

  /** Appends an event with an explicit stream id at `ms`, so the window's edges are exact. */
  const add = (ms: number, seq: number, cardId: string) =>
    redis.xadd(keys.events(), `${ms}-${seq}`, 'e', JSON.stringify({ type: 'card.done', at: new Date(ms).toISOString(), lane: 'l', cardId }));
  const ids = (events: Array<{ cardId?: string }>) => events.map((e) => e.cardId);

  it('answers what since() answers, reading only what is new after the first read', async () => {
    const window = new EventWindow(log, 1_000, 100);
    await add(1_000, 0, 'a');
    await add(1_500, 0, 'b');
    expect(ids(await window.read(2_200))).toEqual(['b']);
    await add(2_300, 0, 'c');
    // Gone from the stream, but already read: a re-read of the whole window would lose it.
    await redis.xdel(keys.events(), '1500-0');
    expect(ids(await window.read(2_400))).toEqual(['b', 'c']);
    // b (1500) leaves the window at 2501; c stays until 3301.
    expect(ids(await window.read(2_501))).toEqual(['c']);
    expect(ids(await window.read(3_301))).toEqual([]);
    await add(3_400, 0, 'd');
    expect(ids(await window.read(3_500))).toEqual(['d']);
  });

  it('keeps only the latest maxEvents, also when more than that came between two reads', async () => {
    const window = new EventWindow(log, 60_000, 3);
    for (let i = 0; i < 4; i++) await add(10_000 + i, 0, `a${i}`);
    expect(ids(await window.read(20_000))).toEqual(['a1', 'a2', 'a3']);
    await add(10_010, 0, 'b0');
    expect(ids(await window.read(20_000))).toEqual(['a2', 'a3', 'b0']);
    for (let i = 0; i < 5; i++) await add(10_020 + i, 0, `c${i}`);
    expect(ids(await window.read(20_000))).toEqual(['c2', 'c3', 'c4']);
    expect(ids(await log.since(20_000 - 60_000, 3))).toEqual(['c2', 'c3', 'c4']);
  });

  it('with types, keeps only events of them, and reads past the skipped ones once (a later page is not taken for a full one)', async () => {
    const window = new EventWindow(log, 60_000, 3, new Set(['card.done']));
    const queued = (ms: number, cardId: string) =>
      redis.xadd(keys.events(), `${ms}-0`, 'e', JSON.stringify({ type: 'card.queued', at: new Date(ms).toISOString(), lane: 'l', cardId }));
    await add(10_000, 0, 'd1');
    for (let i = 1; i <= 2; i++) await queued(10_000 + i, `q${i}`);
    expect(ids(await window.read(20_000))).toEqual(['d1']);
    // Two more entries: read from the last entry read, this is a page of 2, not of every entry since d1.
    for (let i = 3; i <= 4; i++) await queued(10_000 + i, `q${i}`);
    expect(ids(await window.read(20_000))).toEqual(['d1']);
    await add(10_005, 0, 'd2');
    expect(ids(await window.read(20_000))).toEqual(['d1', 'd2']);
  });
});
