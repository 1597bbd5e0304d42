import type { Redis } from 'ioredis';
import { beforeAll, describe, expect, it } from 'vitest';
import { EventLog } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';

describe('EventLog on real Redis', () => {
  const f = useRedis();
  let redis: Redis;
  let log: EventLog;

  beforeAll(() => {
    redis = f.conn;
    log = new EventLog(redis);
  });

  it('since(ms, n) returns the latest n events of the window, oldest first; recent(n) the latest n overall', async () => {
    const [seconds] = await redis.time();
    const startMs = Number(seconds) * 1000 - 1;
    for (const cardId of ['a', 'b', 'c']) await log.append({ type: 'card.queued', at: new Date().toISOString(), lane: 'l', cardId });
    expect((await log.since(startMs, 2)).map((e) => e.cardId)).toEqual(['b', 'c']);
    expect((await log.since(startMs, 10)).map((e) => e.cardId)).toEqual(['a', 'b', 'c']);
    expect(await log.since(Date.now() + 3_600_000, 10)).toEqual([]);
    expect((await log.recent(2)).map((e) => e.cardId)).toEqual(['b', 'c']);
  });

  it('read() blocks for new events after a cursor and skips entries that do not parse', async () => {
    const [last] = await log.recent(1);
    await redis.xadd('lanes-store:events', '*', 'e', '{"not":"an event"}');
    await log.append({ type: 'card.done', at: new Date().toISOString(), lane: 'l', cardId: 'd' });
    const got = await log.read(last!.id, 100);
    expect(got.map((e) => e.cardId)).toEqual(['d']);
  });
});
