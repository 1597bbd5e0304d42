import { describe, expect, it } from 'vitest';
import { evaluateSlotScaling, workerSlotRange, type SlotScalingSnapshot, type SlotView } from '@lanes/supervision';

const NOW = 1_000_000;
const COOLDOWN_MS = 2_000;
const DOWN_DELAY_MS = 10_000;
/** One worker may host 1..6 slots; the lane wants 1..6. */
const CONFIG = { minSlots: 1, maxSlots: 6, slots: 6, cooldownMs: COOLDOWN_MS, downDelayMs: DOWN_DELAY_MS };

const idle = (id: string): SlotView => ({ id, live: true, busy: false, probing: false });
const busy = (id: string): SlotView => ({ id, live: true, busy: true, probing: false });
const probing = (id: string): SlotView => ({ id, live: true, busy: false, probing: true });
const starting = (id: string): SlotView => ({ id, live: false, busy: false, probing: false });
const snap = (over: Partial<SlotScalingSnapshot>): SlotScalingSnapshot => ({ slots: [idle('s0')], waiting: 0, active: 0, workers: 1, breaker: 'closed', ...over });

type Expected = { action: 'add'; count: number } | { action: 'remove'; slotIds: string[] } | { action: 'hold' };

describe('evaluateSlotScaling', () => {
  it.each<[string, SlotScalingSnapshot, Expected, number | undefined]>([
    ['idle at the floor: hold', snap({}), { action: 'hold' }, undefined],
    ['a burst: grow to the demand', snap({ waiting: 3, active: 1 }), { action: 'add', count: 3 }, undefined],
    ['a big burst: grow to the ceiling, no further', snap({ waiting: 30 }), { action: 'add', count: 5 }, undefined],
    ['at the ceiling under a burst: hold', snap({ slots: ['a', 'b', 'c', 'd', 'e', 'f'].map(busy), waiting: 24, active: 6 }), { action: 'hold' }, undefined],
    ['grow 1 ms after the cooldown', snap({ waiting: 3, lastChangeAt: NOW - COOLDOWN_MS }), { action: 'add', count: 2 }, undefined],
    ['no growth 1 ms inside the cooldown', snap({ waiting: 3, lastChangeAt: NOW - COOLDOWN_MS + 1 }), { action: 'hold' }, undefined],
    ['breaker open: no growth', snap({ waiting: 10, breaker: 'open' }), { action: 'hold' }, undefined],
    [
      'breaker open, two workers: the lane holds what is live across both, so no live slot goes',
      snap({ slots: [idle('a'), idle('b')], waiting: 10, workers: 2, otherLiveSlots: 2, breaker: 'open', surplusSince: NOW - DOWN_DELAY_MS }),
      { action: 'hold' },
      undefined,
    ],
    ['two workers share the lane: half each, rounded up', snap({ waiting: 5, workers: 2 }), { action: 'add', count: 2 }, undefined],
    ['no worker seen yet (registry empty) counts as this one', snap({ waiting: 3, workers: 0 }), { action: 'add', count: 2 }, undefined],
    ['below the floor (boot): fill it even inside the cooldown', snap({ slots: [], lastChangeAt: NOW }), { action: 'add', count: 1 }, undefined],
    ['surplus seen first: start the delay', snap({ slots: [busy('a'), idle('b'), idle('c')], active: 1 }), { action: 'hold' }, NOW],
    [
      'surplus 1 ms short of the delay: hold',
      snap({ slots: [busy('a'), idle('b'), idle('c')], active: 1, surplusSince: NOW - DOWN_DELAY_MS + 1 }),
      { action: 'hold' },
      NOW - DOWN_DELAY_MS + 1,
    ],
    [
      'surplus for the delay: drop idle slots, newest first',
      snap({ slots: [busy('a'), idle('b'), idle('c')], active: 1, surplusSince: NOW - DOWN_DELAY_MS }),
      { action: 'remove', slotIds: ['c', 'b'] },
      undefined,
    ],
    [
      'surplus but inside the cooldown: hold, keep counting',
      snap({ slots: [busy('a'), idle('b')], active: 1, surplusSince: NOW - DOWN_DELAY_MS, lastChangeAt: NOW - 1 }),
      { action: 'hold' },
      NOW - DOWN_DELAY_MS,
    ],
    [
      'busy slots are never dropped',
      snap({ slots: [busy('a'), busy('b'), busy('c')], active: 3, waiting: 0, workers: 3, surplusSince: NOW - DOWN_DELAY_MS }),
      { action: 'hold' },
      NOW - DOWN_DELAY_MS,
    ],
    [
      'only idle live unprobed slots go; the surplus left is remembered',
      snap({ slots: [idle('a'), busy('b'), probing('c'), starting('d'), idle('e')], active: 1, surplusSince: NOW - DOWN_DELAY_MS }),
      { action: 'remove', slotIds: ['e', 'a'] },
      NOW - DOWN_DELAY_MS,
    ],
    ['demand back to the slot count: surplus forgotten', snap({ slots: [busy('a'), idle('b')], active: 1, waiting: 1, surplusSince: NOW - 5 }), { action: 'hold' }, undefined],
    [
      'idle, all back to the floor',
      snap({ slots: ['a', 'b', 'c', 'd', 'e', 'f'].map(idle), surplusSince: NOW - DOWN_DELAY_MS }),
      { action: 'remove', slotIds: ['f', 'e', 'd', 'c', 'b'] },
      undefined,
    ],
  ])('%s', (_name, snapshot, expected, surplusSince) => {
    const d = evaluateSlotScaling(snapshot, CONFIG, NOW);
    expect(d).toMatchObject(expected);
    expect(d.surplusSince).toBe(surplusSince);
    expect(d.reason).toBeTruthy();
  });

  it('above the ceiling (config lowered): drops idle slots without waiting out the delay', () => {
    const d = evaluateSlotScaling(snap({ slots: ['a', 'b', 'c'].map(idle) }), { ...CONFIG, minSlots: 1, slots: 2 }, NOW);
    expect(d).toMatchObject({ action: 'remove', slotIds: ['c', 'b'] });
  });

  it('a fixed lane (min = max = slots) holds its size, idle or busy', () => {
    const fixed = { ...CONFIG, minSlots: 2, maxSlots: 2, slots: 2 };
    expect(evaluateSlotScaling(snap({ slots: [idle('a'), idle('b')], surplusSince: NOW - DOWN_DELAY_MS }), fixed, NOW).action).toBe('hold');
    expect(evaluateSlotScaling(snap({ slots: [idle('a'), idle('b')], waiting: 50 }), fixed, NOW).action).toBe('hold');
    expect(evaluateSlotScaling(snap({ slots: [idle('a'), idle('b')], workers: 3 }), fixed, NOW).action).toBe('hold');
  });
});

describe('workerSlotRange', () => {
  it.each([
    [
      { minSlots: 0, slots: 4 },
      { floor: 1, ceiling: 4 },
    ],
    [
      { minSlots: 2, slots: 4 },
      { floor: 2, ceiling: 4 },
    ],
    [
      { minSlots: 8, slots: 2 },
      { floor: 2, ceiling: 2 },
    ],
  ])('%j → %j', (config, range) => {
    expect(workerSlotRange(config)).toEqual(range);
  });
});
