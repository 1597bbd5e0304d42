/**
 * The one time-window convention every policy here shares, so boundaries agree everywhere:
 * an event at `t` is inside a window of `windowMs` while `now - t < windowMs`.
 * At exactly `now - t === windowMs` it has aged out. Events stamped in the future (clock skew)
 * count as inside: dropping them early would be the surprising choice.
 */
export function isInsideWindow(t: number, now: number, windowMs: number): boolean {
  return now - t < windowMs;
}

/** The timestamps still inside the window, sorted oldest first. Never mutates its input. */
export function pruneWindow(timestamps: readonly number[], now: number, windowMs: number): number[] {
  return timestamps.filter((t) => isInsideWindow(t, now, windowMs)).sort((a, b) => a - b);
}
