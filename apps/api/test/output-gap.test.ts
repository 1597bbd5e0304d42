import { describe, expect, it } from 'vitest';
import type { OutputEntry, OutputPosition } from '@lanes/queue';
import { outputGap, positionAfter } from '../src/sse/output-gap.js';

const lines = (id: string, before: number, through: number): OutputEntry => ({ id, kind: 'lines', lines: ['x'], bytes: { before, through } });

describe('outputGap: whether output was trimmed between a position and the next entry', () => {
  const cases: Array<[string, OutputPosition, OutputEntry, ReturnType<typeof outputGap>]> = [
    ['the next entry meets the position', { id: '5-0', through: 40 }, lines('6-0', 40, 50), undefined],
    ['bytes between them were trimmed', { id: '5-0', through: 40 }, lines('9-0', 70, 80), { after: '5-0', oldest: '9-0' }],
    ['from the start, nothing trimmed', { id: '0-0', through: 0 }, lines('1-0', 0, 10), undefined],
    ['from the start, the first lines trimmed', { id: '0-0', through: 0 }, lines('4-0', 30, 40), { after: '0-0', oldest: '4-0' }],
    ['a position no longer held, output trimmed before the entry', { id: '2-0', through: undefined }, lines('4-0', 30, 40), { after: '2-0', oldest: '4-0' }],
    ['a position no longer held, nothing ever trimmed', { id: '2-0', through: undefined }, lines('4-0', 0, 40), undefined],
    ['an end entry meets the last lines', { id: '5-0', through: 40 }, { id: '6-0', kind: 'end', state: 'done', bytes: { before: 40, through: 40 } }, undefined],
    ['an entry written without t tells nothing', { id: '5-0', through: 40 }, { id: '9-0', kind: 'lines', lines: ['x'] }, undefined],
  ];
  it.each(cases)('%s', (_name, at, next, want) => {
    expect(outputGap(at, next)).toEqual(want);
  });

  it('the position after an entry is its id and the bytes through it', () => {
    expect(positionAfter(lines('7-1', 10, 25))).toEqual({ id: '7-1', through: 25 });
    expect(positionAfter({ id: '7-2', kind: 'lines', lines: [] })).toEqual({ id: '7-2', through: undefined });
  });
});
