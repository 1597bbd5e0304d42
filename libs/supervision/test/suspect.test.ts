import { describe, expect, it } from 'vitest';
import { suspectOf, SUSPECT_EXIT_CODES, type CommandOutcome } from '@lanes/supervision';

const exited = (exitCode: number, over: Partial<Extract<CommandOutcome, { kind: 'exited' }>> = {}): CommandOutcome => ({
  kind: 'exited',
  exitCode,
  stdout: '',
  stderr: '',
  timedOut: false,
  cancelled: false,
  ...over,
});

describe('suspectOf (rule 1)', () => {
  it('names the sandbox-death exit codes', () => {
    expect([...SUSPECT_EXIT_CODES].sort((a, b) => a - b)).toEqual([-1, 1, 137]);
  });

  it.each<[string, CommandOutcome, boolean, string]>([
    ['exec threw provider-unavailable', { kind: 'threw', error: 'provider-unavailable', message: 'ECONNRESET' }, true, 'provider-error'],
    ['exec threw sandbox-gone', { kind: 'threw', error: 'sandbox-gone', message: 'gone' }, true, 'provider-error'],
    ['exec threw other', { kind: 'threw', error: 'other', message: '?' }, true, 'provider-error'],
    ['bare exit 1', exited(1), true, 'bare-exit'],
    ['bare exit -1', exited(-1), true, 'bare-exit'],
    ['bare exit 137', exited(137), true, 'bare-exit'],
    ['exit 1, whitespace-only output counts as empty', exited(1, { stdout: ' \n', stderr: '\t' }), true, 'bare-exit'],
    ['exit 137 with only a newline on stderr', exited(137, { stderr: '\n' }), true, 'bare-exit'],
    ['exit 1 with stdout', exited(1, { stdout: 'x' }), false, 'exit 1 with output'],
    ['exit 1 with stderr', exited(1, { stderr: 'boom' }), false, 'exit 1 with output'],
    ['exit 137 with stdout', exited(137, { stdout: 'killed' }), false, 'exit 137 with output'],
    ['bare exit 2 (not a death code)', exited(2), false, 'exit 2 (not a sandbox-death code)'],
    ['bare exit 136 (one below 137)', exited(136), false, 'exit 136 (not a sandbox-death code)'],
    ['bare exit 138 (one above 137)', exited(138), false, 'exit 138 (not a sandbox-death code)'],
    ['bare exit 0', exited(0), false, 'exit 0'],
    ['exit 0 with output', exited(0, { stdout: 'ok' }), false, 'exit 0'],
    ['hung past its deadline', exited(137, { timedOut: true }), true, 'hang'],
    ['hung with output', exited(130, { timedOut: true, stdout: 'partial' }), true, 'hang'],
    ['timed out and cancelled: the hang wins', exited(137, { timedOut: true, cancelled: true }), true, 'hang'],
    ['user cancel with a bare 137 is not suspect', exited(137, { cancelled: true }), false, 'cancelled by user (exit 137)'],
    ['user cancel with a bare 1 is not suspect', exited(1, { cancelled: true }), false, 'cancelled by user (exit 1)'],
  ])('%s', (_name, outcome, suspect, reason) => {
    const s = suspectOf(outcome);
    expect(s.suspect).toBe(suspect);
    expect(s.reason).toBe(reason);
  });

  it('carries a human detail on suspects', () => {
    const s = suspectOf({ kind: 'threw', error: 'sandbox-gone', message: 'no such sandbox' });
    expect(s).toMatchObject({ suspect: true, detail: expect.stringContaining('no such sandbox') });
  });
});
