import { describe, expect, it } from 'vitest';
import { evaluateIdleCanary, type IdleCanaryDecision } from '@lanes/supervision';

type Reading = Parameters<typeof evaluateIdleCanary>[1];
const answered: Reading = { finding: { kind: 'polled', poll: { state: 'live' }, canary: 'answered' }, reason: 'echoed' };
const silent: Reading = { finding: { kind: 'polled', poll: { state: 'live' }, canary: 'silent' }, reason: 'no echo' };
const unreachable: Reading = { finding: { kind: 'probe-failed', error: 'provider-unavailable', message: 'UNAVAILABLE' }, reason: 'threw' };
const other: Reading = { finding: { kind: 'probe-failed', error: 'other', message: 'odd' }, reason: 'threw' };

describe('evaluateIdleCanary (a live-polling sandbox that cannot run commands)', () => {
  it.each<[string, number, Reading, IdleCanaryDecision['action'], number, boolean | undefined]>([
    ['answered resets the run', 2, answered, 'passed', 0, undefined],
    ['first silent canary is counted', 0, silent, 'count', 1, false],
    ['second silent canary is counted', 1, silent, 'count', 2, false],
    ['third silent canary in a row: dead', 2, silent, 'mark-dead', 3, false],
    ['unreachable counts and feeds the breaker', 0, unreachable, 'count', 1, true],
    ['third unreachable in a row: dead, and the breaker hears it', 2, unreachable, 'mark-dead', 3, true],
    ['other error counts, not breaker fuel', 1, other, 'count', 2, false],
  ])('%s', (_name, before, reading, action, after, breakerFailure) => {
    const d = evaluateIdleCanary(before, reading, { maxFailedCanaries: 3 });
    expect(d.action).toBe(action);
    expect(d.failedCanaries).toBe(after);
    if (d.action !== 'passed') expect(d.breakerFailure).toBe(breakerFailure);
    expect(d.reason).toBeTruthy();
  });
});
