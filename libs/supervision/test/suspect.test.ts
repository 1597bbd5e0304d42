import { describe, expect, it } from 'vitest';
import { isDeathExitCode, suspectOf, SUSPECT_EXIT_CODES, type CommandOutcome } from '@lanes/supervision';

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
    ['bare exit 2 (not a death code)', exited(2), false, 'exit 2 (not a sandbox-death code)'],
    // A death may be reported as the command's status (rule 1): 124, −1 or ≥ 128, output or not.
    ['exit 137 with stdout', exited(137, { stdout: 'killed' }), true, 'death-exit'],
    ['exit 137 with stderr', exited(137, { stderr: 'Killed' }), true, 'death-exit'],
    ['exit -1 with output', exited(-1, { stdout: 'partial' }), true, 'death-exit'],
    ['exit 124 with output (lifetime ran out)', exited(124, { stdout: 'working' }), true, 'death-exit'],
    ['bare exit 124', exited(124), true, 'death-exit'],
    ['exit 123 with output (one below 124)', exited(123, { stdout: 'x' }), false, 'exit 123 with output'],
    ['exit 125 with output (one above 124)', exited(125, { stdout: 'x' }), false, 'exit 125 with output'],
    ['exit 127 with output (one below 128)', exited(127, { stderr: 'not found' }), false, 'exit 127 with output'],
    ['bare exit 127 (one below 128)', exited(127), false, 'exit 127 (not a sandbox-death code)'],
    ['exit 128 with output (the first signal code)', exited(128, { stdout: 'x' }), true, 'death-exit'],
    ['bare exit 136 (a signal, not bare-exit)', exited(136), true, 'death-exit'],
    ['bare exit 138 (a signal, not bare-exit)', exited(138), true, 'death-exit'],
    ['exit 143 with output (SIGTERM)', exited(143, { stdout: 'bye' }), true, 'death-exit'],
    ['exit 255 with output', exited(255, { stderr: 'ssh: closed' }), true, 'death-exit'],
    ['exit -2 with output (only −1 means no status)', exited(-2, { stdout: 'x' }), false, 'exit -2 with output'],
    ['bare exit 0', exited(0), false, 'exit 0'],
    ['exit 0 with output', exited(0, { stdout: 'ok' }), false, 'exit 0'],
    ['hung past its deadline', exited(137, { timedOut: true }), true, 'hang'],
    ['hung with output', exited(130, { timedOut: true, stdout: 'partial' }), true, 'hang'],
    ['timed out and cancelled: the hang wins', exited(137, { timedOut: true, cancelled: true }), true, 'hang'],
    // lanes' own kills carry their flag, so their 124 or signal code is not read as a death report
    ['lanes timed it out: 137 with output is a hang, not a death report', exited(137, { timedOut: true, stdout: 'partial' }), true, 'hang'],
    ['lanes timed it out: 124 with output is a hang', exited(124, { timedOut: true, stdout: 'partial' }), true, 'hang'],
    ['user cancel with a bare 137 is not suspect', exited(137, { cancelled: true }), false, 'cancelled by user (exit 137)'],
    ['user cancel with a bare 1 is not suspect', exited(1, { cancelled: true }), false, 'cancelled by user (exit 1)'],
    ['user cancel: 130 with output is not suspect', exited(130, { cancelled: true, stdout: 'partial' }), false, 'cancelled by user (exit 130)'],
    ['user cancel: 137 with output is not suspect', exited(137, { cancelled: true, stderr: 'Killed' }), false, 'cancelled by user (exit 137)'],
  ])('%s', (_name, outcome, suspect, reason) => {
    const s = suspectOf(outcome);
    expect(s.suspect).toBe(suspect);
    expect(s.reason).toBe(reason);
  });

  it.each<[number, boolean]>([
    [-2, false],
    [-1, true],
    [0, false],
    [1, false],
    [123, false],
    [124, true],
    [125, false],
    [127, false],
    [128, true],
    [137, true],
    [255, true],
  ])('isDeathExitCode(%i) → %s', (code, death) => {
    expect(isDeathExitCode(code)).toBe(death);
  });

  it('says in the detail that a death-exit had output', () => {
    expect(suspectOf(exited(137, { stdout: 'hi' }))).toMatchObject({ suspect: true, detail: expect.stringContaining('exit 137 with output') });
    expect(suspectOf(exited(124))).toMatchObject({ suspect: true, detail: expect.not.stringContaining('with output') });
  });

  it('carries a human detail on suspects', () => {
    const s = suspectOf({ kind: 'threw', error: 'sandbox-gone', message: 'no such sandbox' });
    expect(s).toMatchObject({ suspect: true, detail: expect.stringContaining('no such sandbox') });
  });
});
