import { describe, expect, it } from 'vitest';
import { evaluateScale, type ScaleSnapshot } from '@lanes/supervision';

const NOW = 1_800_000_000_000;
const LANE = { minSlots: 1, maxSlots: 8, slots: 2 };
const snap = (over: Partial<ScaleSnapshot> = {}): ScaleSnapshot => ({
  waiting: 0,
  prioritized: 0,
  active: 0,
  delayed: [],
  blocked: [],
  liveSlots: 2,
  breaker: 'closed',
  ...over,
});
const delayedAt = (...dueAts: number[]) => dueAts.map((dueAt, i) => ({ id: `d${i}`, dueAt }));

describe('evaluateScale: depth and desired workers for KEDA', () => {
  it.each<[string, ScaleSnapshot, number, number, number]>([
    ['idle → minSlots → 1 worker', snap(), 0, 1, 1],
    ['waiting only', snap({ waiting: 3 }), 3, 3, 2],
    ['prioritized counts (LLEN wait misses it)', snap({ prioritized: 4 }), 4, 4, 2],
    ['active counts', snap({ active: 2, waiting: 1 }), 3, 3, 2],
    ['delayed due exactly now counts', snap({ delayed: delayedAt(NOW) }), 1, 1, 1],
    ['delayed due 1 ms ago counts', snap({ delayed: delayedAt(NOW - 1, NOW - 1, NOW - 1) }), 3, 3, 2],
    ['delayed due in 1 ms does not count', snap({ delayed: delayedAt(NOW + 1) }), 0, 1, 1],
    ['sandbox-dead blocked is re-drive-pending', snap({ blocked: [{ id: 'b', blockedReason: 'sandbox-dead' }] }), 1, 1, 1],
    [
      'provider-outage blocked is re-drive-pending',
      snap({
        blocked: [
          { id: 'b', blockedReason: 'provider-outage' },
          { id: 'c', blockedReason: 'provider-outage' },
        ],
        liveSlots: 2,
      }),
      2,
      2,
      1,
    ],
    ['needs-human blocked waits on a person, not a slot', snap({ blocked: [{ id: 'h', blockedReason: 'needs-human' }] }), 0, 1, 1],
    ['a blocked card whose job is delayed and due counts once', snap({ delayed: [{ id: 'b', dueAt: NOW - 5 }], blocked: [{ id: 'b', blockedReason: 'sandbox-dead' }] }), 1, 1, 1],
    ['all states together', snap({ waiting: 1, prioritized: 1, active: 1, delayed: delayedAt(NOW), blocked: [{ id: 'x', blockedReason: 'sandbox-dead' }] }), 5, 5, 3],
    ['depth above maxSlots: clamped to 8 slots → 4 workers', snap({ waiting: 100 }), 100, 8, 4],
    ['breaker open: slots held at live', snap({ waiting: 10, liveSlots: 3, breaker: 'open' }), 10, 3, 2],
    ['ready cards their keys hold back ask for no slot', snap({ waiting: 20, heldBack: 19 }), 1, 1, 1],
    ['held back among waiting and prioritized alike', snap({ waiting: 3, prioritized: 2, heldBack: 4, active: 1 }), 2, 2, 1],
    ['a held-back count past the ready cards (read a moment apart) takes none below zero', snap({ waiting: 2, heldBack: 5 }), 0, 1, 1],
  ])('%s', (_name, snapshot, depth, slots, workers) => {
    const d = evaluateScale(snapshot, LANE, NOW);
    expect(d.kind).toBe('scale');
    expect(d.depth.total).toBe(depth);
    expect(d.desiredSlots).toBe(slots);
    expect(d.desiredWorkers).toBe(workers);
    expect(d.reason).toContain(`depth ${depth}`);
  });

  it('scales to zero workers when minSlots is 0 and nothing wants a slot', () => {
    expect(evaluateScale(snap({ liveSlots: 0 }), { minSlots: 0, maxSlots: 4, slots: 1 }, NOW).desiredWorkers).toBe(0);
  });
});
