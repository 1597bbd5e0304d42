import { describe, expect, it } from 'vitest';
import { evaluateSupersede, type SupersedeDecision } from '../src/supersede.js';

describe('evaluateSupersede', () => {
  it.each<[string, string | undefined, SupersedeDecision]>([
    ['no newer card is known (its key forgotten, or a board added the job itself before any record)', undefined, { action: 'run', reason: 'no newer card of its key is known' }],
    ["it is its key's newest card", 'c1', { action: 'run', reason: "it is its key's newest card" }],
    ['a newer card of its key arrived', 'c2', { action: 'cancel', by: 'c2', reason: 'superseded by c2' }],
  ])('%s', (_name, latest, decision) => {
    expect(evaluateSupersede({ self: 'c1', latest })).toEqual(decision);
  });
});
