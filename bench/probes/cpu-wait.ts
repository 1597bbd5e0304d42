/**
 * How long this process's main thread sat runnable without a CPU, and how long the box had some
 * task in that state, between two readings. A latency tail on an oversubscribed box can be the
 * scheduler's, not the event loop's; these two tell which. Linux only: elsewhere the figures are
 * undefined.
 *
 * - /proc/thread-self/schedstat: time on a CPU (ns), time waiting on a run queue (ns), timeslices.
 * - /proc/pressure/cpu (PSI): `some … total=` µs during which at least one task waited for a CPU.
 */
import { readFileSync } from 'node:fs';

export interface CpuWaitReading {
  /** The main thread's run-queue wait, in ms, or undefined where schedstat is missing. */
  threadWaitMs: number | undefined;
  /** Times the main thread was put on a CPU. */
  threadSlices: number | undefined;
  /** Box-wide PSI "some" stall time, in ms, or undefined where PSI is missing. */
  boxSomeMs: number | undefined;
}

function readOr<T>(path: string, parse: (text: string) => T): T | undefined {
  try {
    return parse(readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

/** One reading now; subtract two with `cpuWaitBetween`. */
export function readCpuWait(): CpuWaitReading {
  // Read on the main thread, so thread-self is the event loop's thread.
  const sched = readOr('/proc/thread-self/schedstat', (t) => t.trim().split(/\s+/).map(Number));
  const some = readOr('/proc/pressure/cpu', (t) => Number(/^some .*total=(\d+)/m.exec(t)?.[1]));
  return {
    threadWaitMs: sched && Number.isFinite(sched[1]) ? sched[1]! / 1e6 : undefined,
    threadSlices: sched && Number.isFinite(sched[2]) ? sched[2] : undefined,
    boxSomeMs: some !== undefined && Number.isFinite(some) ? some / 1e3 : undefined,
  };
}

const minus = (a: number | undefined, b: number | undefined) => (a === undefined || b === undefined ? undefined : a - b);

export function cpuWaitBetween(before: CpuWaitReading, after: CpuWaitReading): CpuWaitReading {
  return {
    threadWaitMs: minus(after.threadWaitMs, before.threadWaitMs),
    threadSlices: minus(after.threadSlices, before.threadSlices),
    boxSomeMs: minus(after.boxSomeMs, before.boxSomeMs),
  };
}

export interface CpuWaitFigures {
  /** The main thread's run-queue wait as a share of the wall time, in %. */
  threadWaitPct: number | null;
  /** The mean wait before each timeslice, in µs. */
  threadWaitPerSliceUs: number | null;
  /** The box's PSI "some" time as a share of the wall time, in %. */
  boxSomePct: number | null;
}

/** The figures over several measured stretches (each a `cpuWaitBetween` and its wall time); null where a reading was missing. */
export function cpuWaitFigures(stretches: ReadonlyArray<CpuWaitReading & { wallMs: number }>): CpuWaitFigures {
  const total = (key: keyof CpuWaitReading) => (stretches.every((s) => s[key] !== undefined) ? stretches.reduce((a, s) => a + s[key]!, 0) : undefined);
  const wallMs = stretches.reduce((a, s) => a + s.wallMs, 0);
  const share = (ms: number | undefined) => (ms === undefined || wallMs === 0 ? null : Number(((100 * ms) / wallMs).toFixed(1)));
  const waitMs = total('threadWaitMs');
  const slices = total('threadSlices');
  return {
    threadWaitPct: share(waitMs),
    threadWaitPerSliceUs: waitMs === undefined || !slices ? null : Math.round((1e3 * waitMs) / slices),
    boxSomePct: share(total('boxSomeMs')),
  };
}
