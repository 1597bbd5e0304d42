import { describe, expect, it } from 'vitest';
import { evaluateIdleProbe, type IdleProbeFinding } from '@lanes/supervision';

describe('evaluateIdleProbe', () => {
  it.each<[string, IdleProbeFinding, string, unknown]>([
    ['live', { kind: 'polled', poll: { state: 'live' } }, 'keep', undefined],
    ['exited(137)', { kind: 'polled', poll: { state: 'exited', exitCode: 137 } }, 'mark-dead', 137],
    ['exited(0) keeps 0', { kind: 'polled', poll: { state: 'exited', exitCode: 0 } }, 'mark-dead', 0],
    ['missing', { kind: 'polled', poll: { state: 'missing' } }, 'mark-dead', 'unknown'],
    ['provider says gone', { kind: 'probe-failed', error: 'sandbox-gone', message: 'not found' }, 'mark-dead', 'unknown'],
    ['provider unavailable', { kind: 'probe-failed', error: 'provider-unavailable', message: 'UNAVAILABLE' }, 'keep', undefined],
    ['other failure', { kind: 'probe-failed', error: 'other', message: 'bug' }, 'keep', undefined],
  ])('%s → %s', (_what, finding, action, observedExitCode) => {
    const d = evaluateIdleProbe(finding);
    expect(d.action).toBe(action);
    if (d.action === 'mark-dead') expect(d.observedExitCode).toBe(observedExitCode);
    expect(d.reason).toBeTruthy();
  });
});
