import { describe, expect, it } from 'vitest';
import { ackCallbacks, callbackBacklog, keys } from '@lanes/queue';
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
