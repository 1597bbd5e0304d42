import { describe, expect, it } from 'vitest';
import { CardStateSchema, isLegalCardTransition, isRetryableCardState, isTerminalCardState, legalSourcesOf, type CardState } from '@lanes/contracts';

/** Written out by hand (not derived from the table under test): every ordered pair of states. */
const PAIRS: Array<[CardState, CardState, boolean]> = [
  ['queued', 'queued', true],
  ['queued', 'running', true],
  ['queued', 'blocked', true],
  ['queued', 'cancelled', true],
  ['queued', 'done', false],
  ['queued', 'failed', false],
  ['running', 'queued', true],
  ['running', 'running', true],
  ['running', 'blocked', true],
  ['running', 'done', true],
  ['running', 'failed', true],
  ['running', 'cancelled', true],
  ['blocked', 'queued', true],
  ['blocked', 'running', true],
  ['blocked', 'blocked', true],
  ['blocked', 'cancelled', true],
  ['blocked', 'done', false],
  ['blocked', 'failed', false],
  ['done', 'queued', false],
  ['done', 'running', false],
  ['done', 'blocked', false],
  ['done', 'done', false],
  ['done', 'failed', false],
  ['done', 'cancelled', false],
  ['failed', 'queued', true],
  ['failed', 'running', false],
  ['failed', 'blocked', false],
  ['failed', 'done', false],
  ['failed', 'failed', false],
  ['failed', 'cancelled', false],
  ['cancelled', 'queued', true],
  ['cancelled', 'running', false],
  ['cancelled', 'blocked', false],
  ['cancelled', 'done', false],
  ['cancelled', 'failed', false],
  ['cancelled', 'cancelled', false],
];

describe('card transitions', () => {
  it('the table below names every ordered pair of states exactly once', () => {
    const states = CardStateSchema.options;
    const named = new Set(PAIRS.map(([a, b]) => `${a}>${b}`));
    expect(named.size).toBe(PAIRS.length);
    expect(named.size).toBe(states.length * states.length);
  });

  it.each(PAIRS)('%s → %s is legal: %s', (from, to, legal) => {
    expect(isLegalCardTransition(from, to)).toBe(legal);
  });

  it.each([
    ['done', []],
    ['failed', ['queued']],
    ['cancelled', ['queued']],
  ] as const)('terminal %s exits only to %j (a retry)', (from, exits) => {
    expect(CardStateSchema.options.filter((to) => isLegalCardTransition(from, to))).toEqual(exits);
  });

  it.each(CardStateSchema.options.map((s) => [s, s === 'failed' || s === 'cancelled'] as const))('%s is retryable: %s', (state, retryable) => {
    expect(isRetryableCardState(state)).toBe(retryable);
  });

  it.each(CardStateSchema.options)('a progress move to %s never leaves a terminal state; a retry leaves nothing else', (to) => {
    expect(legalSourcesOf(to).filter(isTerminalCardState)).toEqual([]);
    expect(legalSourcesOf(to, 'retry').every(isTerminalCardState)).toBe(true);
  });

  it.each([
    ['done', ['running']],
    ['cancelled', ['queued', 'running', 'blocked']],
    ['running', ['queued', 'running', 'blocked']],
    ['queued', ['queued', 'running', 'blocked']],
  ] as const)('legalSourcesOf(%s) is %j', (to, from) => {
    expect(legalSourcesOf(to)).toEqual(from);
  });

  it.each([
    ['queued', ['failed', 'cancelled']],
    ['running', []],
    ['done', []],
  ] as const)("legalSourcesOf(%s, 'retry') is %j", (to, from) => {
    expect(legalSourcesOf(to, 'retry')).toEqual(from);
  });
});
