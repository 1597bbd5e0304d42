import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuWaitBetween, cpuWaitFigures, readCpuWait } from '../../bench/probes/cpu-wait.js';

describe('bench/probes/cpu-wait', () => {
  it.runIf(existsSync('/proc/thread-self/schedstat'))('reads the main thread: every sleep and wake-up is a new timeslice', async () => {
    const before = readCpuWait();
    for (let i = 0; i < 5; i++) await new Promise((r) => setTimeout(r, 5));
    const d = cpuWaitBetween(before, readCpuWait());
    expect(d.threadSlices).toBeGreaterThanOrEqual(5);
    expect(d.threadWaitMs).toBeGreaterThanOrEqual(0);
  });

  it('a figure missing from either reading stays missing', () => {
    const d = cpuWaitBetween({ threadWaitMs: 1, threadSlices: 2, boxSomeMs: undefined }, { threadWaitMs: 4, threadSlices: 7, boxSomeMs: 9 });
    expect(d).toEqual({ threadWaitMs: 3, threadSlices: 5, boxSomeMs: undefined });
  });
});

describe('bench/probes/cpu-wait figures', () => {
  it('sums the stretches and divides by their wall time; a missing reading leaves its figure null', () => {
    const figures = cpuWaitFigures([
      { threadWaitMs: 30, threadSlices: 100, boxSomeMs: undefined, wallMs: 100 },
      { threadWaitMs: 20, threadSlices: 50, boxSomeMs: 10, wallMs: 100 },
    ]);
    expect(figures).toEqual({ threadWaitPct: 25, threadWaitPerSliceUs: 333, boxSomePct: null });
  });

  it('nothing measured is null, not NaN', () => {
    expect(cpuWaitFigures([])).toEqual({ threadWaitPct: null, threadWaitPerSliceUs: null, boxSomePct: null });
  });
});
