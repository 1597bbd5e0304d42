/**
 * Part of the benches: the CPU the whole box has spent, from /proc/stat's first line (every
 * process: the side measured, its sandboxes, Redis, the bench's client, and whatever else runs).
 */
import { readFileSync } from 'node:fs';

/** Linux's USER_HZ: /proc's CPU times count hundredths of a second. */
const MS_PER_TICK = 10;

/** The box's busy and total CPU so far (idle and iowait are not busy), in ms. */
export function boxCpuMs(): { busy: number; total: number } {
  const ticks = readFileSync('/proc/stat', 'latin1').split('\n')[0]!.split(/\s+/).slice(1).map(Number);
  const total = ticks.reduce((a, b) => a + b, 0);
  return { busy: (total - ticks[3]! - ticks[4]!) * MS_PER_TICK, total: total * MS_PER_TICK };
}
