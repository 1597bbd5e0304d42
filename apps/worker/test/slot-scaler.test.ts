import { describe, expect, it } from 'vitest';
import { LaneConfigSchema } from '@lanes/contracts';
import type { FleetStore, LaneQueues } from '@lanes/queue';
import type { LaneBreaker } from '../src/lane-breaker.js';
import type { SlotPool } from '../src/slot-pool.js';
import { SlotScaler } from '../src/slot-scaler.js';
import { testLog } from '../../../test/harness/index.js';

const NOW = 1_000_000;
const COOLDOWN_MS = 2_000;

/** A scaler over fakes that count its reads of the queue; every slot busy and nothing waiting, so each tick holds. */
function scaler(clock: { now: number }) {
  const reads = { count: 0 };
  const lane = LaneConfigSchema.parse({ name: 'grow', agent: ['true'], slots: 4, minSlots: 0, maxSlots: 4, slotScaling: { cooldownMs: COOLDOWN_MS } });
  const queues = {
    queue: () => ({
      getJobCounts: async () => {
        reads.count += 1;
        return { waiting: 0, prioritized: 0, active: 1 };
      },
    }),
  } as unknown as LaneQueues;
  const fleet = { slots: async () => [], liveness: async () => ({}) } as unknown as FleetStore;
  const breaker = { state: { state: 'closed' } } as unknown as LaneBreaker;
  // One live slot, busy: the worker's floor, so a tick holds (and changes nothing).
  const pool = { slots: [{ id: 's-0', state: 'live', cardId: 'c-0', probing: false }] } as unknown as SlotPool;
  const s = new SlotScaler({ lane, workerId: 'w', pool, breaker, queues, fleet, log: testLog(), now: () => clock.now, addSlot: () => undefined, retireSlots: () => false });
  return { s, reads };
}

describe('SlotScaler.demandRose (issue 29: a burst grows at once)', () => {
  it.each([
    { label: 'the next one a cooldown later less 1 ms: skipped', laterMs: COOLDOWN_MS - 1, reads: 1 },
    { label: 'the next one a cooldown later: ticks again', laterMs: COOLDOWN_MS, reads: 2 },
  ])('ticks at once, at most once per cooldown however many cards take the last slot; $label', async ({ laterMs, reads }) => {
    const clock = { now: NOW };
    const { s, reads: counted } = scaler(clock);
    // A tick's reads go out as it starts (no await before them), so each count is read at once;
    // tick() joins a tick in flight, so awaiting it waits for the demand's tick to end, whatever the load.
    s.demandRose();
    expect(counted.count).toBe(1);
    await s.tick();
    clock.now = NOW + laterMs;
    s.demandRose();
    expect(counted.count).toBe(reads);
  });
});
