/**
 * Part of the benches: the order statistics every bench and probe reports, defined once so that
 * two figures called p99 are the same statistic.
 */

/** The nearest-rank percentile (p in 0–100) of `xs`, which need not be sorted; NaN when empty. */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))] ?? Number.NaN;
}

/** The median of `xs`: the middle value, or the mean of the two middle ones; NaN when empty. */
export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? (s[(s.length - 1) >> 1]! + s[s.length >> 1]!) / 2 : Number.NaN;
}
