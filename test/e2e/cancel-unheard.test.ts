import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { CardStore, keys } from '@lanes/queue';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * A cancel answered 202 is carried out even when the worker running the card did not hear its
 * message: pub/sub keeps nothing for a subscriber that is reconnecting (a Redis restart, a
 * partition, a dropped connection), so the request is also kept on the card.
 */
describe('a cancel the worker did not hear', () => {
  let redis: TestRedis;
  let t: TestStack;
  let admin: Redis;
  const markDir = mkdtempSync(join(tmpdir(), 'lanes-cancel-'));
  /** Each agent of the `marked` lane writes its card id here as it starts, then works for two minutes. */
  const startedFile = join(markDir, 'started');
  const started = () => (existsSync(startedFile) ? readFileSync(startedFile, 'utf8').split('\n').filter(Boolean) : []);

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    const marked = `require('node:fs').appendFileSync(${JSON.stringify(startedFile)}, process.env.LANES_CARD_ID + '\\n'); setTimeout(() => {}, 120000);`;
    t = await startTestStack(redis.url, [
      { name: 'demo', slots: 1, agent: [process.execPath, DEMO_AGENT], commandTimeoutMs: 120_000, killGraceMs: 200 },
      { name: 'marked', slots: 1, agent: [process.execPath, '-e', marked], commandTimeoutMs: 120_000, killGraceMs: 200 },
    ]);
  });
  afterAll(async () => {
    await t?.stop();
    admin?.disconnect();
    await redis?.stop();
    rmSync(markDir, { recursive: true, force: true });
  });

  /** Drops the worker's cancel subscription and posts the cancel before it is back; false if it came back first. */
  async function cancelUnheard(id: string): Promise<boolean> {
    await admin.client('KILL', 'TYPE', 'pubsub');
    const res = await fetch(`${t.stack.url}/v1/cards/${id}/cancel`, { method: 'POST', headers: { 'content-type': 'application/json' } });
    expect(res.status).toBe(202);
    // Subscriptions only come back after the kill, so none now means none when the cancel published.
    const [, subscribers] = (await admin.pubsub('NUMSUB', keys.cancelChannel())) as [string, number];
    return subscribers === 0;
  }

  it('still cancels the running card, in its sandbox, which stays live', async () => {
    let unheard: string | undefined;
    for (let i = 0; i < 5 && !unheard; i++) {
      const id = `unheard-${i}`;
      await t.api.request('POST', '/v1/cards', { id, lane: 'demo', title: 'long', metadata: { sleepMs: 120_000 } });
      await t.api.waitCard(id, 'running', (c) => c.state === 'running');
      if (await cancelUnheard(id)) unheard = id;
      else await t.api.waitCard(id, 'cancelled', (c) => c.state === 'cancelled', 10_000);
    }
    expect(unheard, 'the subscription came back before the cancel in every try').toBeDefined();
    const running = await t.api.card(unheard!);
    const cancelled = await t.api.waitCard(unheard!, 'cancelled', (c) => c.state === 'cancelled', 15_000);
    expect(cancelled.sandboxId).toBe(running.sandboxId);
    expect(cancelled.history.filter((h) => h.state === 'running')).toHaveLength(1);
    // The command's process group was killed, not the sandbox: the slot is live and takes the next card.
    await waitFor('slot live again', async () => (await t.api.lanes()).find((l) => l.name === 'demo')!.slots.every((s) => s.sandbox?.state === 'live' && !s.cardId));
    await t.api.request('POST', '/v1/cards', { id: 'after-unheard', lane: 'demo', title: 'next' });
    const next = await t.api.waitCard('after-unheard', 'done', (c) => c.state === 'done');
    expect(next.sandboxId).toBe(running.sandboxId);
  });

  it('a request kept from a run that ended before it was heard stops the next run before its agent starts', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'holder', lane: 'marked', title: 'holds the slot' });
    await waitFor('the holder agent started', () => started().includes('holder'));
    await t.api.request('POST', '/v1/cards', { id: 'kept', lane: 'marked', title: 'long' });
    // As a run that retried before it heard the cancel leaves it: the request on a card that waits.
    // Its message goes out while no run holds the card, so only the kept request can stop it.
    expect(await new CardStore({ redis: admin, now: Date.now }).requestCancel('kept')).toBe('queued');
    expect((await t.api.request('POST', '/v1/cards/holder/cancel')).status).toBe(202);
    await t.api.waitCard('holder', 'cancelled', (c) => c.state === 'cancelled', 10_000);
    const cancelled = await t.api.waitCard('kept', 'cancelled', (c) => c.state === 'cancelled', 15_000);
    expect(cancelled.history.map((h) => h.state)).toEqual(['queued', 'running', 'cancelled']);
    expect(started()).toEqual(['holder']);
  });
});
