import { describe, expect, it } from 'vitest';
import { median, percentile } from '../../bench/support/stats.js';
import { threadCpuByName, threadCpuMs } from '../../bench/support/thread-cpu.js';

describe('bench: order statistics', () => {
  it.each([
    { xs: [], p: 50, want: Number.NaN },
    { xs: [7], p: 99, want: 7 },
    { xs: [3, 1, 2], p: 50, want: 2 },
    { xs: [10, 20, 30, 40], p: 50, want: 20 },
    { xs: [10, 20, 30, 40], p: 75, want: 30 },
    { xs: [10, 20, 30, 40], p: 100, want: 40 },
    { xs: [10, 20, 30, 40], p: 0, want: 10 },
    { xs: Array.from({ length: 100 }, (_, i) => 100 - i), p: 99, want: 99 },
    { xs: Array.from({ length: 1000 }, (_, i) => i + 1), p: 99, want: 990 },
  ])('percentile($p) of $xs.length values is the nearest rank, unsorted input', ({ xs, p, want }) => {
    expect(percentile(xs, p)).toBe(want);
  });

  it.each([
    { xs: [], want: Number.NaN },
    { xs: [5], want: 5 },
    { xs: [9, 1, 5], want: 5 },
    { xs: [4, 1, 3, 2], want: 2.5 },
  ])('median of $xs', ({ xs, want }) => {
    expect(median(xs)).toBe(want);
  });

  it('leaves its input in its order', () => {
    const xs = [3, 1, 2];
    median(xs);
    percentile(xs, 50);
    expect(xs).toEqual([3, 1, 2]);
  });
});

describe('bench: CPU of a process from its threads', () => {
  it('counts what this process spins, to within the ticks that /proc/self/stat would lose', () => {
    const before = { threads: threadCpuMs(process.pid), usage: process.cpuUsage() };
    let spun = process.cpuUsage(before.usage);
    while (spun.user + spun.system < 50_000) spun = process.cpuUsage(before.usage);
    const threads = threadCpuMs(process.pid) - before.threads;
    const usageMs = (spun.user + spun.system) / 1000;
    expect(threads).toBeGreaterThanOrEqual(usageMs * 0.8);
    expect(threads).toBeLessThan(usageMs + 1_000);
  });

  it('throws for a process that is not there', () => {
    expect(() => threadCpuMs(2 ** 22 + 1)).toThrow(/ENOENT/);
  });

  it("counts what the main thread spins under the main thread's name (node on Node 20, node-MainThread later)", () => {
    const main = (byName: Map<string, number>) => {
      const names = [...byName.keys()].filter((n) => n === 'node' || n === 'node-MainThread');
      expect(names).toHaveLength(1);
      return byName.get(names[0]!)!;
    };
    const before = main(threadCpuByName(process.pid));
    const start = process.cpuUsage();
    let spun = process.cpuUsage(start);
    while (spun.user + spun.system < 50_000) spun = process.cpuUsage(start);
    expect(main(threadCpuByName(process.pid)) - before).toBeGreaterThanOrEqual(((spun.user + spun.system) / 1000) * 0.8);
  });
});
