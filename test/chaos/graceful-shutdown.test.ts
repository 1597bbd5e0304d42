import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { CardStore, EventLog } from '@lanes/queue';
import { startRedis, startTestStack, type TestRedis, type TestStack } from '../harness/index.js';

const lane = { name: 'graceful', slots: 1, agent: [process.execPath, DEMO_AGENT], attempts: 1 };

/** Reads a card straight from the store, with no worker running. */
async function readCardFromStore(redisUrl: string) {
  const conn = new Redis(redisUrl);
  try {
    return (await new CardStore({ redis: conn, events: new EventLog(conn), now: Date.now }).get('g-1'))!;
  } finally {
    conn.disconnect();
  }
}

describe('graceful shutdown', () => {
  let redis: TestRedis;
  let t: TestStack | undefined;

  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('hands a running card back without spending an attempt; the next worker completes it', async () => {
    t = await startTestStack(redis.url, [lane]);
    await t.api.request('POST', '/v1/cards', { id: 'g-1', lane: 'graceful', title: 'interrupted by a deploy', metadata: { sleepMs: 2_000 } });
    const running = await t.api.waitCard('g-1', 'running', (c) => c.state === 'running');
    const pid = (await t.api.lanes())[0]!.slots[0]!.sandbox!.pid!;
    await t.stop();
    t = undefined;
    expect(() => process.kill(pid, 0)).toThrow(); // the sandbox went with the worker

    const handedBack = await readCardFromStore(redis.url);
    expect(handedBack.state).toBe('queued');
    expect(handedBack.history.at(-1)!.message).toBe('handed back on shutdown');

    // The lane allows one attempt: had the shutdown spent it, the card could not run again.
    t = await startTestStack(redis.url, [lane]);
    const done = await t.api.waitCard('g-1', 'done on the next worker', (c) => c.state === 'done');
    expect(done.attempts).toBe(1);
    expect(done.history.filter((h) => h.state === 'running').map((h) => h.attempt)).toEqual([1, 1]);
    expect(done.history.filter((h) => h.state === 'done')).toHaveLength(1);
    expect(done.sandboxId).not.toBe(running.sandboxId);
  });
});
