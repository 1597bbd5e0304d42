import { describe, expect, it } from 'vitest';
import { laneResume, resumeGap } from '../src/sse/resume-gap.js';

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

describe('laneResume: a scoped replay the shared stream trimmed past goes on from its lanes’ own streams where they vouch for it', () => {
  const held = (firstId: string | undefined, trimmed = true) => ({ firstId, trimmed });
  const lanes = (since: string | undefined, ...windows: Array<{ firstId: string | undefined; trimmed: boolean }>) => ({
    since,
    windows: new Map(windows.map((w, i) => [`lane-${i}`, w])),
  });
  const cases: Array<[string, string, ReturnType<typeof lanes>, string | undefined, ReturnType<typeof laneResume>]> = [
    ['no lane stream written yet: the shared stream’s gap stands', '50-0', lanes(undefined, held(undefined, false)), undefined, { use: 'shared' }],
    ['a cursor from before the lane streams began: they cannot vouch', '5-0', lanes('10-0', held('1-0', false)), undefined, { use: 'shared' }],
    ['a lane that never trimmed holds every event after the cursor: no gap', '50-0', lanes('10-0', held('10-0', false)), undefined, { use: 'lanes' }],
    ['a lane whose stream holds the cursor: no gap', '50-0', lanes('10-0', held('40-0')), undefined, { use: 'lanes' }],
    ['a lane with no stream had no event since the mark: no gap', '50-0', lanes('10-0', held(undefined, false)), undefined, { use: 'lanes' }],
    ['a lane that trimmed past the cursor: its own gap', '50-0', lanes('10-0', held('60-0')), undefined, { use: 'lanes', gap: { after: '50-0', oldest: '60-0' } }],
    [
      'two lanes trimmed past it: the gap runs to the later oldest',
      '50-0',
      lanes('10-0', held('60-0'), held('70-0'), held('20-0')),
      undefined,
      { use: 'lanes', gap: { after: '50-0', oldest: '70-0' } },
    ],
    ['a cursor at the mark is vouched for', '10-0', lanes('10-0', held('10-0', false)), undefined, { use: 'lanes' }],
    ['a hole already told is not told again', '50-0', lanes('10-0', held('60-0')), '60-0', { use: 'lanes' }],
  ];
  it.each(cases)('%s', (_name, cursor, own, toldBefore, want) => {
    expect(laneResume(cursor, own, toldBefore)).toEqual(want);
  });
});
