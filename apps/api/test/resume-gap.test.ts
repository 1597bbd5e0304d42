import { describe, expect, it } from 'vitest';
import { resumeGap } from '../src/sse/resume-gap.js';

describe('resumeGap: whether a replay from a cursor may have lost events to the trim', () => {
  type Window = { firstId: string | undefined; trimmed: boolean };
  const cases: Array<[string, string, Window, string | undefined, ReturnType<typeof resumeGap>]> = [
    ['never trimmed: nothing was lost, from any cursor', '0-0', { firstId: '100-0', trimmed: false }, undefined, undefined],
    ['trimmed, cursor before the oldest held', '5-0', { firstId: '100-0', trimmed: true }, undefined, { after: '5-0', oldest: '100-0' }],
    ['trimmed, cursor at the oldest held', '100-0', { firstId: '100-0', trimmed: true }, undefined, undefined],
    ['trimmed, cursor after the oldest held', '150-3', { firstId: '100-0', trimmed: true }, undefined, undefined],
    ['trimmed, same ms, earlier seq', '100-0', { firstId: '100-1', trimmed: true }, undefined, { after: '100-0', oldest: '100-1' }],
    ['ids compare as numbers, not text', '99-0', { firstId: '100-0', trimmed: true }, undefined, { after: '99-0', oldest: '100-0' }],
    ['already told of the hole up to the oldest held: nothing new', '5-0', { firstId: '100-0', trimmed: true }, '100-0', undefined],
    ['already told of a later hole than the window shows', '5-0', { firstId: '100-0', trimmed: true }, '120-0', undefined],
    ['the trim went on past what was told: a new gap', '5-0', { firstId: '130-0', trimmed: true }, '100-0', { after: '5-0', oldest: '130-0' }],
    ['an empty stream holds nothing to go on from', '5-0', { firstId: undefined, trimmed: true }, undefined, undefined],
  ];
  it.each(cases)('%s', (_name, cursor, window, toldBefore, want) => {
    expect(resumeGap(cursor, window, toldBefore)).toEqual(want);
  });
});
