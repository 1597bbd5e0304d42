import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { CardRecord } from '@lanes/contracts';
import { EventLog, type StoredEvent } from '@lanes/queue';
import { isAlive } from '@lanes/sandbox';
import { useRedis, waitFor } from '../harness/index.js';

/** Planned renewal (DESIGN rule 7): recycled and released sandboxes are no deaths. */
describe('planned sandbox renewal on the local provider', () => {
  const f = useRedis();
  let conn: Redis;
  beforeAll(() => {
    conn = new Redis(f.redis.url);
  });
  afterAll(() => conn?.disconnect());

  const eventsOf = async (lane: string): Promise<StoredEvent[]> => (await new EventLog(conn).recent(2_000)).filter((e) => e.lane === lane).reverse();
  const sandboxIdsOf = (cards: CardRecord[]) => new Set(cards.flatMap((c) => c.history.map((h) => h.sandboxId).filter(Boolean)));
  const expectNoDeath = (cards: CardRecord[], events: StoredEvent[]) => {
    for (const c of cards) {
      expect(c.state, c.id).toBe('done');
      expect(c.attempts, c.id).toBe(1);
      expect(c.infraRetries, c.id).toBe(0);
      expect(
        c.history.some((h) => h.state === 'blocked'),
        c.id,
      ).toBe(false);
    }
    expect(events.filter((e) => e.type === 'sandbox.dead')).toEqual([]);
  };

  it('with sandboxRecycleAfterMs of a second and cards flowing, sandbox ids rotate between cards, counted as sandbox.recycled, with no death and no infra retry', async () => {
    const t = await f.stack([{ name: 'recy', slots: 1, agent: [process.execPath, DEMO_AGENT], sandboxRecycleAfterMs: 1_000 }]);
    const ids = Array.from({ length: 8 }, (_, i) => `recy-${i}`);
    for (const id of ids) await t.api.request('POST', '/v1/cards', { id, lane: 'recy', title: 'a card among many', metadata: { sleepMs: 400 } });
    const cards = await Promise.all(ids.map((id) => t.api.waitCard(id, 'done', (c) => c.state === 'done')));
    const events = await eventsOf('recy');
    const recycled = events.filter((e) => e.type === 'sandbox.recycled');
    const used = sandboxIdsOf(cards);
    expect(used.size).toBeGreaterThanOrEqual(2);
    // Every sandbox a card ran on but the last was recycled first, and each was made fresh (no respawn).
    for (const id of used) if (id !== cards.at(-1)!.sandboxId) expect(recycled.map((e) => e.sandboxId)).toContain(id);
    expect(events.filter((e) => e.type === 'sandbox.respawned')).toEqual([]);
    // Each card ran on one sandbox only: a recycle happens between cards, never under one.
    for (const c of cards) expect(new Set(c.history.map((h) => h.sandboxId).filter(Boolean)).size, c.id).toBe(1);
    expectNoDeath(cards, events);
  });

  it('never starts a card on a sandbox with less lifetime left than the card may take: it gets a fresh one, and the old one is recycled before the provider ends it', async () => {
    // Lifetime 4 s, card up to 2.5 s: from 1.5 s of age on, a card needs a fresh sandbox.
    const t = await f.stack([{ name: 'short', slots: 1, agent: [process.execPath, DEMO_AGENT], sandboxLifetimeMs: 4_000, sandboxRecycleAfterMs: 3_000, commandTimeoutMs: 2_500 }]);
    const live = await waitFor('the first sandbox live', async () => (await eventsOf('short')).find((e) => e.type === 'sandbox.live'));
    const liveAt = Date.parse(live.at);
    await waitFor('the sandbox to have less than the card timeout left', () => Date.now() - liveAt > 1_600, { timeoutMs: 5_000 });
    await t.api.request('POST', '/v1/cards', { id: 'short-1', lane: 'short', title: 'needs 2.5 s' });
    const card = await t.api.waitCard('short-1', 'done', (c) => c.state === 'done');
    expect(card.sandboxId).not.toBe(live.sandboxId);
    const recycled = (await eventsOf('short')).filter((e) => e.type === 'sandbox.recycled');
    expect(recycled[0]).toMatchObject({ sandboxId: live.sandboxId, data: { reason: expect.stringContaining('lifetime left') } });
    // The sandbox it ran on is recycled while idle at 3 s of age, before its 4 s lifetime could end it.
    await waitFor('the idle recycle of the second sandbox', async () => (await eventsOf('short')).some((e) => e.type === 'sandbox.recycled' && e.sandboxId === card.sandboxId));
    expectNoDeath([card], await eventsOf('short'));
  });

  it('a lane with minSlots 0 goes to zero sandboxes when idle, runs a card on a cold start, and goes back to zero', async () => {
    const t = await f.stack([{ name: 'cold', slots: 1, minSlots: 0, maxSlots: 1, idleReleaseMs: 500, agent: [process.execPath, DEMO_AGENT] }]);
    const sandboxesNow = async () =>
      (await t.api.lanes())
        .find((l) => l.name === 'cold')!
        .slots.filter((s) => s.sandbox)
        .map((s) => s.sandbox!);
    const zero = async () => (await sandboxesNow()).length === 0;
    const warm = await waitFor('the warm sandbox released', async () => (await eventsOf('cold')).find((e) => e.type === 'sandbox.released'));
    await waitFor('zero sandboxes', zero);
    const warmLive = (await eventsOf('cold')).find((e) => e.type === 'sandbox.live' && e.sandboxId === warm.sandboxId);
    const warmPid = (warmLive?.data as { pid?: number } | undefined)?.pid;
    expect(warmPid).toBeGreaterThan(0);
    await waitFor('the released sandbox process to end', () => !isAlive(warmPid!));
    const scale = (await t.api.request<{ desiredWorkers: number }>('GET', '/v1/lanes/cold/scale')).body;
    expect(scale.desiredWorkers).toBe(0);

    await t.api.request('POST', '/v1/cards', { id: 'cold-1', lane: 'cold', title: 'first card on a cold lane' });
    const card = await t.api.waitCard('cold-1', 'done', (c) => c.state === 'done');
    expect(card.sandboxId).not.toBe(warm.sandboxId);
    await waitFor('the cold-start sandbox released after the card', async () =>
      (await eventsOf('cold')).some((e) => e.type === 'sandbox.released' && e.sandboxId === card.sandboxId),
    );
    await waitFor('zero sandboxes again', zero);
    expectNoDeath([card], await eventsOf('cold'));
  });
});
