import { Gauge, Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { withoutBlankLines } from '../src/metrics.js';

describe('withoutBlankLines', () => {
  it.each([
    ['blocks joined with an extra newline', '# HELP a x\na 1\n\n# HELP b y\nb 2\n', '# HELP a x\na 1\n# HELP b y\nb 2\n'],
    ['an empty block between two', 'a 1\n\n\nb 2\n', 'a 1\nb 2\n'],
    ['whitespace-only lines', 'a 1\n  \nb 2', 'a 1\nb 2\n'],
    ['already clean', 'a 1\n', 'a 1\n'],
    ['nothing', '', ''],
  ])('%s', (_name, text, want) => {
    expect(withoutBlankLines(text)).toBe(want);
  });

  it('cleans what prom-client itself produces (an unobserved histogram and a gauge)', async () => {
    const registry = new Registry();
    new Histogram({ name: 'h_seconds', help: 'h', registers: [registry], buckets: [1] });
    new Gauge({ name: 'g', help: 'g', registers: [registry] }).set(1);
    const raw = await registry.metrics();
    expect(raw.split('\n').slice(0, -1)).toContain('');
    const clean = withoutBlankLines(raw);
    expect(clean.split('\n').slice(0, -1)).not.toContain('');
    expect(clean).toContain('g 1');
  });
});
