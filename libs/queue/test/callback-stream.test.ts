import { describe, expect, it } from 'vitest';
import { ackCallbacks, callbackBacklog, callbacksOwed, keys } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';

const GROUP = 'lanes-callbacks';

/** The callback stream is trimmed only past what every group has acknowledged, on a real Redis. */
describe('ackCallbacks', () => {
  const f = useRedis();
  const add = () => f.conn.xadd(keys.callbacks(), '*', 'e', '{}') as Promise<string>;
  const read = async (consumer: string, count: number): Promise<string[]> => {
    const reply = (await f.conn.xreadgroup('GROUP', GROUP, consumer, 'COUNT', count, 'STREAMS', keys.callbacks(), '>')) as Array<[string, Array<[string, string[]]>]> | null;
    return (reply?.[0]?.[1] ?? []).map(([id]) => id);
  };
  const ids = async () => ((await f.conn.xrange(keys.callbacks(), '-', '+')) as Array<[string, string[]]>).map(([id]) => id);

  it('keeps every entry from the oldest unacknowledged one on, and what no group has read', async () => {
    await f.conn.flushall();
    // No group yet: nothing is owed to anyone known, and nothing is trimmed.
    const [a, b, c, d, e] = [await add(), await add(), await add(), await add(), await add()];
    expect(await ackCallbacks(f.conn, GROUP, [])).toBe(5);
    await f.conn.xgroup('CREATE', keys.callbacks(), GROUP, '0');
    expect(await read('one', 3)).toEqual([a, b, c]);
    // b and c acknowledged, a still pending: nothing goes, since a is older.
    expect(await ackCallbacks(f.conn, GROUP, [b!, c!])).toBe(5);
    expect(await ids()).toEqual([a, b, c, d, e]);
    // a acknowledged: a to c go; d and e were never read, so they stay.
    expect(await ackCallbacks(f.conn, GROUP, [a!])).toBe(2);
    expect(await ids()).toEqual([d, e]);
    expect(await callbackBacklog(f.conn)).toBe(2);
    // A second group that has read nothing holds everything it has not read.
    await f.conn.xgroup('CREATE', keys.callbacks(), 'other', '0');
    expect(await read('one', 2)).toEqual([d, e]);
    expect(await ackCallbacks(f.conn, GROUP, [d!, e!])).toBe(2);
    await f.conn.xgroup('DESTROY', keys.callbacks(), 'other');
    expect(await ackCallbacks(f.conn, GROUP, [])).toBe(0);
  });

  it("gives each acknowledged entry back to its lane's owed count once; an emptied stream owes nothing, a drifted count included", async () => {
    await f.conn.flushall();
    await f.conn.xgroup('CREATE', keys.callbacks(), GROUP, '0', 'MKSTREAM');
    // As the card script writes them: the entry names its lane, and the lane's count goes up with it.
    const owe = async (lane: string) => {
      await f.conn.hincrby(keys.callbacksOwed(), lane, 1);
      return (await f.conn.xadd(keys.callbacks(), '*', 'e', '{}', 'l', lane)) as string;
    };
    const [a1, a2, b1] = [await owe('lane-a'), await owe('lane-a'), await owe('lane-b')];
    const unnamed = await add();
    await f.conn.hset(keys.callbacksOwed(), 'lane-x', 7);
    expect(await callbacksOwed(f.conn)).toEqual({ 'lane-a': 2, 'lane-b': 1, 'lane-x': 7 });
    expect(await read('one', 4)).toEqual([a1, a2, b1, unnamed]);
    expect(await ackCallbacks(f.conn, GROUP, [a2!, b1!, unnamed])).toBe(4);
    expect(await callbacksOwed(f.conn)).toEqual({ 'lane-a': 1, 'lane-x': 7 });
    // Acknowledged again (a supervisor that took over): given back once only.
    expect(await ackCallbacks(f.conn, GROUP, [a2!, b1!])).toBe(4);
    expect(await callbacksOwed(f.conn)).toEqual({ 'lane-a': 1, 'lane-x': 7 });
    expect(await ackCallbacks(f.conn, GROUP, [a1!])).toBe(0);
    expect(await callbacksOwed(f.conn)).toEqual({});
  });

  it('acknowledges more ids than one script call takes', async () => {
    await f.conn.flushall();
    await f.conn.xgroup('CREATE', keys.callbacks(), GROUP, '0', 'MKSTREAM');
    const pipeline = f.conn.pipeline();
    for (let i = 0; i < 2_500; i++) pipeline.xadd(keys.callbacks(), '*', 'e', '{}');
    await pipeline.exec();
    const all = await read('one', 2_500);
    expect(all).toHaveLength(2_500);
    expect(await ackCallbacks(f.conn, GROUP, all)).toBe(0);
    expect(((await f.conn.xpending(keys.callbacks(), GROUP)) as [number])[0]).toBe(0);
  });
});
