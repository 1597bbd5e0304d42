import { describe, expect, it } from 'vitest';
import { failoverLoss, lostBytes, type CardSnapshot } from './failover.js';

const entry = (state: string, at: number) => JSON.stringify({ at: new Date(at).toISOString(), state, attempt: 1 });
const q = entry('queued', 1);
const r = entry('running', 2);
const d = entry('done', 3);

describe('failoverLoss: the cards before the kill against the new primary', () => {
  it.each<[string, CardSnapshot, CardSnapshot, { vanished: string[]; movesLost: Array<{ card: string; before: string; after: string }> }]>([
    ['the same history', [q, r, d], [q, r, d], { vanished: [], movesLost: [] }],
    ['moves written after the promotion only append', [q, r], [q, r, d], { vanished: [], movesLost: [] }],
    ['no record before the kill (accepted later, or not yet)', undefined, undefined, { vanished: [], movesLost: [] }],
    ['a record gone', [q], undefined, { vanished: ['c1'], movesLost: [] }],
    ['a done lost', [q, r, d], [q, r], { vanished: [], movesLost: [{ card: 'c1', before: 'done', after: 'running' }] }],
    // Lost, and then the card moved on again on the new primary: the prefix still differs.
    ['a move lost and another written since', [q, r], [q, entry('running', 9)], { vanished: [], movesLost: [{ card: 'c1', before: 'running', after: 'running' }] }],
  ])('%s', (_, before, after, want) => {
    expect(failoverLoss(new Map([['c1', before]]), new Map([['c1', after]]))).toEqual(want);
  });

  it('says nothing of a history at its cap (it drops old entries as it grows)', () => {
    const full = Array.from({ length: 200 }, (_, i) => entry('running', i));
    expect(failoverLoss(new Map([['c1', full]]), new Map([['c1', [...full.slice(1), d]]])).movesLost).toEqual([]);
  });
});

describe('lostBytes', () => {
  it.each<[number | undefined, number | undefined, number | undefined]>([
    [1_000, 1_001, 0],
    [1_000, 901, 100],
    // The replica got more than the primary had when it was read: nothing lost that the soak can see.
    [1_000, 1_500, 0],
    [undefined, 1_001, undefined],
    [1_000, undefined, undefined],
    [1_000, 0, undefined],
  ])('primary at %s, promoted second_repl_offset %s → %s', (primary, second, want) => {
    expect(lostBytes(primary, second)).toBe(want);
  });
});
