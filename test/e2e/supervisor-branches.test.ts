import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { Card } from '@lanes/contracts';
import { CardStore, EventLog, QUEUE_PREFIX, jobOptions } from '@lanes/queue';
import { useRedis, waitFor } from '../harness/index.js';

const agent = [process.execPath, DEMO_AGENT];

/** Supervisor branches over a real stack: real Redis, BullMQ, local sandboxes. */
describe('supervisor branches end to end', () => {
  const f = useRedis();

  it('the re-drive sweep: a card left blocked (sandbox-dead) by a worker that died before re-driving it runs again once the lane has a live slot', async () => {
    const t = await f.stack([{ name: 'sweep', slots: 1, agent }]);
    await waitFor('a live slot', async () => (await t.api.lanes())[0]!.slots[0]?.sandbox?.state === 'live');
    // What a worker that died between "blocked" and its re-drive leaves behind: the card blocked,
    // its job delayed for an hour, and nobody left to promote it.
    const store = new CardStore({ redis: f.conn, events: new EventLog(f.conn), now: Date.now });
    const card: Card = { id: 'orphaned-block', lane: 'sweep', title: 'blocked by a dead sandbox', priority: 0 };
    const queue = new Queue('sweep', { connection: f.conn, prefix: QUEUE_PREFIX });
    try {
      await store.create(card);
      await queue.add('sweep', card, { ...jobOptions(card, { attempts: 3 }), delay: 3_600_000 });
      const moved = await store.transition(
        card,
        { to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', message: 'sandbox died; its worker died too', retryAt: Date.now() + 3_600_000 },
        { kind: 'board' },
      );
      expect(moved.ok).toBe(true);
      const done = await t.api.waitCard(card.id, 'done, re-driven by the sweep', (c) => c.state === 'done', 20_000);
      expect(done.history.some((h) => h.state === 'queued' && (h.message ?? '').startsWith('re-driven by supervisor sweep'))).toBe(true);
      expect(done.attempts).toBe(1);
    } finally {
      await queue.close();
    }
  });
});
