/**
 * Part of the benches: the CPU one process has spent, summed over its threads' schedstat
 * (nanoseconds, where /proc/<pid>/stat counts 10 ms ticks, too coarse for a burst of 50 ms).
 */
import { readdirSync, readFileSync } from 'node:fs';

const NS_PER_MS = 1e6;

/** CPU time every thread of `pid` has run so far (schedstat's first field), in ms. */
export function threadCpuMs(pid: number): number {
  return totalCpuMs(threadCpuByName(pid));
}

/** The CPU of every thread in a `threadCpuByName` reading, in ms. */
export function totalCpuMs(byName: ReadonlyMap<string, number>): number {
  let ms = 0;
  for (const v of byName.values()) ms += v;
  return ms;
}

/**
 * The same, summed per thread name (`comm`, its trailing number dropped, so Node's V8 workers are
 * one entry): where a process's CPU went, main thread or V8's helpers. Node 20 names every thread
 * `node`; Node 22 and later name them (`node-MainThread`, `node-V8Worker`, `libuv-worker`).
 */
export function threadCpuByName(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'latin1').trim().replace(/\d+$/, '');
      const ns = Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]);
      byName.set(name, (byName.get(name) ?? 0) + ns / NS_PER_MS);
    } catch (err) {
      // A thread that ended between the listing and the read took its time with it.
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ESRCH') throw err;
    }
  }
  return byName;
}
