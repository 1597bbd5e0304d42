import { describe, expect, it } from 'vitest';
import { resumeGap } from '../src/sse/resume-gap.js';

describe('resumeGap: whether a replay from a cursor may have lost events to the trim', () => {
  const cases: Array<[string, string, { firstId: string | undefined; trimmed: boolean }, ReturnType<typeof resumeGap>]> = [
    ['never trimmed: nothing was lost, from any cursor', '0-0', { firstId: '100-0', trimmed: false }, undefined],
    ['trimmed, cursor before the oldest held', '5-0', { firstId: '100-0', trimmed: true }, { after: '5-0', oldest: '100-0' }],
    ['trimmed, cursor at the oldest held', '100-0', { firstId: '100-0', trimmed: true }, undefined],
    ['trimmed, cursor after the oldest held', '150-3', { firstId: '100-0', trimmed: true }, undefined],
    ['trimmed, same ms, earlier seq', '100-0', { firstId: '100-1', trimmed: true }, { after: '100-0', oldest: '100-1' }],
    ['ids compare as numbers, not text', '99-0', { firstId: '100-0', trimmed: true }, { after: '99-0', oldest: '100-0' }],
    ['an empty stream holds nothing to go on from', '5-0', { firstId: undefined, trimmed: true }, undefined],
  ];
  it.each(cases)('%s', (_name, cursor, window, want) => {
    expect(resumeGap(cursor, window)).toEqual(want);
  });
});
