import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Card, LaneEvent } from '@lanes/contracts';
import { CardStore, EventLog, keys } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;
type Entries = Array<[string, string[]]>;

describe('lane event streams: every event also in its lane’s own stream, under the same id (real Redis)', () => {
  const f = useRedis();
  let redis: Redis;
  let log: EventLog;
  let store: CardStore;

  beforeAll(() => {
    redis = f.conn;
    log = new EventLog(redis);
    store = new CardStore({ redis, now: () => Date.now() });
  });
  beforeEach(async () => {
    await redis.del(keys.events(), keys.laneEventsSince());
  });

  const event = (lane: string, cardId: string): LaneEvent => ({ type: 'card.key-waiting', at: new Date().toISOString(), lane, cardId });
  const ofLane = async (lane: string) => ((await redis.xrange(keys.events(), '-', '+')) as Entries).filter(([, fields]) => JSON.parse(fields[1]!).lane === lane);

  it('the enqueue script, the card move script and EventLog.append each write both, the lane’s stream holding its lane alone', async () => {
    const lane = uid('lane');
    const other = uid('other');
    const card: Card = { id: uid('card'), lane, title: 't', priority: 0 };
    await store.create(card);
    expect((await store.transition(card, { to: 'cancelled', attempt: 0, message: 'by the test' }, { kind: 'board' })).ok).toBe(true);
    await log.append(event(lane, card.id));
    await log.append(event(other, 'elsewhere'));
    const shared = await ofLane(lane);
    expect(shared.map(([, fields]) => JSON.parse(fields[1]!).type)).toEqual(['card.queued', 'card.cancelled', 'card.key-waiting']);
    expect(await redis.xrange(keys.laneEvents(lane), '-', '+')).toEqual(shared);
    expect(await redis.xrange(keys.laneEvents(other), '-', '+')).toEqual(await ofLane(other));
    // The mark is the first event written this way, and stays there.
    expect(await redis.get(keys.laneEventsSince())).toBe(shared[0]![0]);
  });

  it('a lane stream that cannot take the next id is started again at it, the mark moved there, and the move still commits', async () => {
    const lane = uid('lane');
    await log.append(event(lane, 'first'));
    // Its newest entry later than any id the shared stream will hand out soon.
    await redis.xadd(keys.laneEvents(lane), `${Date.now() + 3_600_000}-0`, 'e', JSON.stringify(event(lane, 'from-the-future')));
    const card: Card = { id: uid('card'), lane, title: 't', priority: 0 };
    await store.create(card);
    const [queued] = await ofLane(lane).then((entries) => entries.slice(-1));
    expect(await redis.xrange(keys.laneEvents(lane), '-', '+')).toEqual([queued]);
    expect(await redis.get(keys.laneEventsSince())).toBe(queued![0]);
    expect((await store.get(card.id))?.state).toBe('queued');
  });

  it('laneRange merges lanes by id up to a count, with each lane’s window and the mark', async () => {
    const [a, b] = [uid('a'), uid('b')];
    for (let i = 0; i < 3; i++) {
      await log.append(event(a, `a-${i}`));
      await log.append(event(b, `b-${i}`));
    }
    const all = (await redis.xrange(keys.events(), '-', '+')) as Entries;
    const ids = all.map(([id]) => id);
    await redis.xtrim(keys.laneEvents(b), 'MAXLEN', 1);
    const page = await log.laneRange([a, b, uid('silent')], ids[0]!, '+', 3);
    expect(page.events.map((e) => e.cardId)).toEqual(['a-1', 'a-2', 'b-2']);
    expect(page.lastId).toBe(ids[5]);
    expect(page.since).toBe(ids[0]);
    expect([...page.windows.values()]).toEqual([
      { firstId: ids[0], trimmed: false },
      { firstId: ids[5], trimmed: true },
      { firstId: undefined, trimmed: false },
    ]);
    // Up to an id, exclusive of the start.
    expect((await log.laneRange([a, b], ids[0]!, ids[2]!, 10)).events.map((e) => e.cardId)).toEqual(['a-1']);
  });
});
