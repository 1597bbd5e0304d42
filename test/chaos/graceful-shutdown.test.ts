import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { CardStore, EventLog } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const lane = { name: 'graceful', slots: 1, agent: [process.execPath, DEMO_AGENT], attempts: 1 };

/** Reads a card straight from the store, with no worker running. */
async function readCardFromStore(redisUrl: string, id = 'g-1') {
  const conn = new Redis(redisUrl);
  try {
    return (await new CardStore({ redis: conn, events: new EventLog(conn), now: Date.now }).get(id))!;
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
    await t.stop();
    t = undefined;
  });

  it('hands back a card still waiting for a sandbox, without waiting out the respawn backoff', async () => {
    const RESPAWN_BACKOFF_MS = 60_000;
    // Every create fails (and is timed here); after the second, the slot waits a minute before the next.
    const createsAt: number[] = [];
    const counting = (p: SandboxProvider): SandboxProvider =>
      new Proxy(p, {
        get(target, prop) {
          if (prop === 'create') {
            return (...args: Parameters<SandboxProvider['create']>) => {
              createsAt.push(Date.now());
              return target.create(...args);
            };
          }
          const value: unknown = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    t = await startTestStack(
      redis.url,
      [
        {
          name: 'stuck',
          slots: 1,
          agent: [process.execPath, DEMO_AGENT],
          faults: { createFailures: 1_000 },
          breaker: { failureThreshold: 100, windowMs: 60_000, openMs: 60_000 },
          respawn: { baseDelayMs: RESPAWN_BACKOFF_MS, maxDelayMs: RESPAWN_BACKOFF_MS, windowMs: 600_000 },
        },
      ],
      { wrap: counting },
    );
    await t.api.request('POST', '/v1/cards', { id: 'stuck-1', lane: 'stuck', title: 'no sandbox yet' });
    await waitFor('the card to be taken by the slot', async () => (await t!.api.lanes())[0]!.counts.active === 1);
    await waitFor('two failed creates: the slot is now in its backoff', () => createsAt.length >= 2);
    const createsBeforeStop = createsAt.length;
    await t.stop();
    const stoppedAt = Date.now();
    t = undefined;
    // Ordering, not speed: the stop ended before the backoff it interrupted would have, and no create followed.
    expect(stoppedAt).toBeLessThan(createsAt.at(-1)! + RESPAWN_BACKOFF_MS);
    expect(createsAt).toHaveLength(createsBeforeStop);
    const card = await readCardFromStore(redis.url, 'stuck-1');
    expect(card.state).toBe('queued');
    expect(card.history.at(-1)!.message).toBe('handed back on shutdown');
    expect(card.history.some((h) => h.state === 'running')).toBe(false);
  }, 120_000);
});
