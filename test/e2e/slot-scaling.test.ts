import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LaneStatus } from '@lanes/contracts';
import { EventLog, FleetStore } from '@lanes/queue';
import { isAlive } from '@lanes/sandbox';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const LANE = 'burst';
const MIN_SLOTS = 1;
const MAX_SLOTS = 6;
const CARDS = 30;
/** Short enough for a quick test, long enough that 30 one-second cards pile up behind one slot. */
const COOLDOWN_MS = 200;
const DOWN_DELAY_MS = 1_500;
/** A lane whose cards run until cancelled. */
const LONG_LANE = 'long';

/**
 * Slots that follow the queue, in one worker process, on real Redis, BullMQ and local sandboxes:
 * a burst grows the worker from minSlots to maxSlots, and idle it shrinks back, taking only idle
 * slots, without interrupting a card.
 */
describe('slots follow the queue within one worker', () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    t = await startTestStack(redis.url, [
      { name: LANE, minSlots: MIN_SLOTS, maxSlots: MAX_SLOTS, agent: ['sleep', '1'], slotScaling: { cooldownMs: COOLDOWN_MS, downDelayMs: DOWN_DELAY_MS } },
      { name: LONG_LANE, minSlots: 1, maxSlots: 3, agent: ['sleep', '600'], killGraceMs: 100, slotScaling: { cooldownMs: COOLDOWN_MS, downDelayMs: DOWN_DELAY_MS } },
    ]);
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  const lane = async (): Promise<LaneStatus> => (await t.api.lanes()).find((l) => l.name === LANE)!;
  const scale = async () => (await t.api.request<{ desiredSlots: number; desiredWorkers: number; depth: { total: number } }>('GET', `/v1/lanes/${LANE}/scale`)).body;

  it('grows to maxSlots under a 30-card burst and back to minSlots idle, with every card done once', async () => {
    await waitFor('the worker at its floor with a live sandbox', async () => {
      const l = await lane();
      return l.slots.length === MIN_SLOTS && l.slots[0]?.sandbox?.state === 'live';
    });
    expect((await scale()).desiredSlots).toBe(MIN_SLOTS);

    const ids = Array.from({ length: CARDS }, (_, i) => `burst-${i}`);
    const posted = await t.api.request('POST', '/v1/cards', { cards: ids.map((id) => ({ id, lane: LANE, title: id })) });
    expect(posted.status).toBe(202);

    // Sample the scale endpoint and the lane's slots until the burst is done.
    let peakDesired = 0;
    let peakSlots = 0;
    const peakSandboxes = new Map<string, number | undefined>();
    await waitFor(
      'all 30 cards done',
      async () => {
        const [s, l] = await Promise.all([scale(), lane()]);
        peakDesired = Math.max(peakDesired, s.desiredSlots);
        peakSlots = Math.max(peakSlots, l.slots.length);
        for (const slot of l.slots) if (slot.sandbox?.state === 'live') peakSandboxes.set(slot.sandbox.id, slot.sandbox.pid);
        return l.counts.completed === CARDS;
      },
      { timeoutMs: 60_000, intervalMs: 100 },
    );
    expect(peakDesired).toBe(MAX_SLOTS);
    expect(peakSlots).toBe(MAX_SLOTS);

    // Idle: back to the floor; the removed slots leave GET /v1/lanes.
    const idle = await waitFor(
      'the worker back at minSlots',
      async () => {
        const l = await lane();
        return l.slots.length === MIN_SLOTS ? l : undefined;
      },
      { timeoutMs: 20_000, intervalMs: 100 },
    );
    expect((await scale()).desiredSlots).toBe(MIN_SLOTS);

    // Every card ran once, in one attempt, never handed back or re-run.
    for (const id of ids) {
      const card = (await t.api.card(id))!;
      expect(card.state, id).toBe('done');
      expect(card.attempts, id).toBe(1);
      expect(card.infraRetries, id).toBe(0);
      expect(
        card.history.map((h) => h.state),
        id,
      ).toEqual(['queued', 'running', 'done']);
    }

    // slot.added and slot.removed are on the event stream: 5 up, 5 down (at least: a card that
    // found every slot busy may add one the scaler later removes).
    const events = (await new EventLog(conn).recent(1_000)).filter((e) => e.lane === LANE);
    const added = events.filter((e) => e.type === 'slot.added');
    const removed = events.filter((e) => e.type === 'slot.removed');
    expect(added.length).toBeGreaterThanOrEqual(MAX_SLOTS - MIN_SLOTS);
    expect(added.length - removed.length).toBe(0);
    const kept = idle.slots[0]!.slot;
    expect(removed.map((e) => e.slot)).not.toContain(kept);

    // The removed slots' sandboxes were terminated by id: recorded so, and their processes gone.
    const fleet = new FleetStore(conn);
    const keptSandbox = idle.slots[0]!.sandbox!.id;
    const gone = [...peakSandboxes].filter(([id]) => id !== keptSandbox);
    expect(gone.length).toBe(MAX_SLOTS - MIN_SLOTS);
    expect(removed.map((e) => e.sandboxId).sort()).toEqual(gone.map(([id]) => id).sort());
    for (const [id, pid] of gone) {
      expect((await fleet.sandbox(id))?.state, id).toBe('terminated');
      if (pid !== undefined) await waitFor(`sandbox ${id} (pid ${pid}) ended`, () => !isAlive(pid));
    }
  });

  it('a worker whose every slot runs a long card still takes new cards on the slots it adds', async () => {
    // BullMQ reads a raised concurrency only when its loop wakes; the lane worker wakes it. Without
    // that, the second card would wait for the first to end (here: never, until cancelled).
    const ids = ['long-0', 'long-1', 'long-2'];
    await t.api.request('POST', '/v1/cards', { id: ids[0], lane: LONG_LANE, title: 'first' });
    await t.api.waitCard(ids[0]!, 'running', (c) => c.state === 'running');
    await t.api.request('POST', '/v1/cards', { cards: ids.slice(1).map((id) => ({ id, lane: LONG_LANE, title: id })) });
    for (const id of ids) await t.api.waitCard(id, 'running', (c) => c.state === 'running', 15_000);
    for (const id of ids) expect((await t.api.request('POST', `/v1/cards/${id}/cancel`)).status).toBe(202);
    for (const id of ids) await t.api.waitCard(id, 'cancelled', (c) => c.state === 'cancelled');
  });
});
