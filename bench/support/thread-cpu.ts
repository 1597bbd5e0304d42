/**
 * Part of the benches: the CPU one process has spent, summed over its threads' schedstat
 * (nanoseconds, where /proc/<pid>/stat counts 10 ms ticks, too coarse for a burst of 50 ms).
 */
import { readdirSync, readFileSync } from 'node:fs';

const NS_PER_MS = 1e6;

/** CPU time every thread of `pid` has run so far (schedstat's first field), in ms. */
export function threadCpuMs(pid: number): number {
  let ns = 0;
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      ns += Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]);
    } catch (err) {
      // A thread that ended between the listing and the read took its time with it.
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ESRCH') throw err;
    }
  }
  return ns / NS_PER_MS;
}
