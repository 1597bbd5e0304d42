import { describe, expect, it } from 'vitest';
import type { BreakerStateName } from '@lanes/contracts';
import { desiredSlots, desiredWorkers, type LaneLoad } from '@lanes/supervision';

const LANE = { minSlots: 1, maxSlots: 8, slots: 2 };
const load = (active: number, waiting: number, liveSlots: number, delayed = 0): LaneLoad => ({ active, waiting, delayed, liveSlots });

describe('desiredSlots', () => {
  it.each<[string, LaneLoad, BreakerStateName, number]>([
    ['idle → minSlots', load(0, 0, 2), 'closed', 1],
    ['one card per slot', load(2, 3, 2), 'closed', 5],
    ['at maxSlots − 1', load(3, 4, 2), 'closed', 7],
    ['at maxSlots', load(4, 4, 2), 'closed', 8],
    ['at maxSlots + 1: clamped', load(4, 5, 2), 'closed', 8],
    ['far above max: clamped', load(8, 500, 8), 'closed', 8],
    ['delayed cards are not demand', load(0, 0, 1, 40), 'closed', 1],
    ['breaker open: no scale-up, hold live', load(0, 10, 3), 'open', 3],
    ['breaker half-open: no scale-up either', load(0, 10, 3), 'half-open', 3],
    ['breaker open: may still scale down to demand', load(1, 1, 5), 'open', 2],
    ['breaker open, nothing live: keep minSlots', load(0, 10, 0), 'open', 1],
    ['breaker open, demand equals live', load(2, 1, 3), 'open', 3],
    ['negative or fractional counts read as 0 / floor', load(-3, 2.7, 1), 'closed', 2],
  ])('%s', (_name, snapshot, breaker, desired) => {
    const d = desiredSlots(snapshot, LANE, breaker);
    expect(d.desired).toBe(desired);
    expect(d.reason).toBeTruthy();
  });

  it('respects minSlots 0 (scale to zero)', () => {
    expect(desiredSlots(load(0, 0, 1), { minSlots: 0, maxSlots: 4, slots: 1 }, 'closed').desired).toBe(0);
  });
});

describe('desiredWorkers: ceil(total / slotsPerWorker)', () => {
  it.each<[number, number, number]>([
    [0, 4, 0],
    [1, 4, 1],
    [3, 4, 1],
    [4, 4, 1],
    [5, 4, 2],
    [8, 4, 2],
    [9, 4, 3],
    [7, 1, 7],
  ])('%i slots at %i per worker → %i', (total, per, workers) => {
    expect(desiredWorkers(total, per).desired).toBe(workers);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses slotsPerWorker %s', (per) => {
    expect(() => desiredWorkers(4, per)).toThrow(RangeError);
  });
});
