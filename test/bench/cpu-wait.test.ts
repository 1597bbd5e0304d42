import { existsSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { cpuWaitBetween, readCpuWait } from '../../bench/cpu-wait.js';

describe('bench/cpu-wait', () => {
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
