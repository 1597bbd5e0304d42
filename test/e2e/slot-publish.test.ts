import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { keys } from '@lanes/queue';
import { useRedis, waitFor } from '../harness/index.js';

const CARDS = 40;

describe("a slot's status under many short cards", () => {
  const f = useRedis();

  it('is written about once per card, not twice (a release rides on the next take), and the slot is shown idle once the cards are done', async () => {
    const t = await f.stack([{ name: 'pub', slots: 1, agent: ['true'] }]);
    await t.api.request('POST', '/v1/cards', { id: 'pub-warm', lane: 'pub', title: 'warm-up' });
    await t.api.waitCard('pub-warm', 'done', (c) => c.state === 'done');

    const monitor = new Redis(f.redis.url, { monitor: true, lazyConnect: true });
    monitor.on('error', () => undefined);
    const monitoring = new Promise<void>((resolve) => monitor.once('monitoring', () => resolve()));
    await monitor.connect();
    await monitoring;
    let slotWrites = 0;
    monitor.on('monitor', (_time: string, args: string[]) => {
      if (String(args[0]).toLowerCase() === 'hset' && args[1] === keys.slots('pub')) slotWrites += 1;
    });
    try {
      const ids = Array.from({ length: CARDS }, (_, i) => `pub-${i}`);
      await t.api.request('POST', '/v1/cards', { cards: ids.map((id) => ({ id, lane: 'pub', title: id })) });
      for (const id of ids) await t.api.waitCard(id, 'done', (c) => c.state === 'done');
      // Before: a write on every take and every release, 2 per card. Now a take goes at once and a
      // release rides on the next take (or the interval's end): about one per card, plus beats.
      expect(slotWrites).toBeLessThan(1.5 * CARDS);
      // The last release is published within one interval.
      await waitFor('the slot shown idle', async () => (await t.api.lanes())[0]!.slots.every((s) => s.cardId === undefined));
    } finally {
      monitor.disconnect();
    }
  });
});
