import { describe, expect, it } from 'vitest';
import { defaults } from '@lanes/contracts';
import {
  DEFAULT_PROBE_CONFIG,
  canaryCommand,
  planProbe,
  planSecondCanary,
  SECOND_CANARY_DEADLINE_FACTOR,
  readCanary,
  suspectOf,
  type CommandOutcome,
  type ProbeFinding,
} from '@lanes/supervision';

const NONCE = 'lanes-canary-7f3a';
const ran = (exitCode: number, stdout: string, timedOut = false): CommandOutcome => ({
  kind: 'exited',
  exitCode,
  stdout,
  stderr: '',
  timedOut,
  cancelled: false,
});

describe('planProbe', () => {
  it.each([0, 137, -1])('a seen exit code %i becomes the finding as is (0 stays 0)', (code) => {
    const outcome: CommandOutcome = { kind: 'threw', error: 'sandbox-gone', message: 'x', observedExitCode: code };
    const plan = planProbe(suspectOf(outcome), DEFAULT_PROBE_CONFIG, outcome);
    expect(plan).toMatchObject({ action: 'seen', finding: { kind: 'polled', poll: { state: 'exited', exitCode: code } } });
  });

  it('defaults the canary deadline from contracts', () => {
    expect(DEFAULT_PROBE_CONFIG.canaryTimeoutMs).toBe(defaults.DEFAULT_CANARY_TIMEOUT_MS);
  });

  it.each<[string, CommandOutcome, 'probe' | 'poll' | 'skip' | 'seen']>([
    ['bare exit 1', ran(1, ''), 'probe'],
    ['bare exit 137: poll and canary, as before', ran(137, ''), 'probe'],
    ['bare exit -1: poll and canary, as before', ran(-1, ''), 'probe'],
    ['hang', ran(137, '', true), 'probe'],
    ['hang with output (lanes timed it out)', ran(137, 'partial', true), 'probe'],
    ['exit 137 with output: one poll, no canary', ran(137, 'hi\n'), 'poll'],
    ['exit -1 with output: one poll', ran(-1, 'hi\n'), 'poll'],
    ['exit 124 with output: one poll', ran(124, 'hi\n'), 'poll'],
    ['bare exit 124: one poll', ran(124, ''), 'poll'],
    ['bare exit 143: one poll', ran(143, ''), 'poll'],
    ['exit 128 with output: one poll', ran(128, 'x'), 'poll'],
    ['exit 127 with output', ran(127, 'x'), 'skip'],
    ['a user cancel with output', { kind: 'exited', exitCode: 130, stdout: 'partial', stderr: '', timedOut: false, cancelled: true }, 'skip'],
    ['threw', { kind: 'threw', error: 'other', message: 'x' }, 'probe'],
    ['threw sandbox-gone, no code seen', { kind: 'threw', error: 'sandbox-gone', message: 'x' }, 'probe'],
    ['threw sandbox-gone with the code seen', { kind: 'threw', error: 'sandbox-gone', message: 'x', observedExitCode: 137 }, 'seen'],
    ['threw unavailable with a code is still probed', { kind: 'threw', error: 'provider-unavailable', message: 'x', observedExitCode: 137 }, 'probe'],
    ['exit 0', ran(0, ''), 'skip'],
    ['exit 1 with output', ran(1, 'err'), 'skip'],
  ])('%s → %s', (_name, outcome, action) => {
    const plan = planProbe(suspectOf(outcome), { canaryTimeoutMs: 1234 }, outcome);
    expect(plan.action).toBe(action);
    if (plan.action === 'probe') expect(plan.canaryTimeoutMs).toBe(1234);
    expect(plan.reason).toBeTruthy();
  });
});

describe('canaryCommand', () => {
  it('echoes the nonce as a plain argument, no shell', () => {
    expect(canaryCommand(NONCE)).toEqual(['echo', NONCE]);
  });
});

describe('readCanary', () => {
  const live = { state: 'live' } as const;
  it.each<[string, CommandOutcome, ProbeFinding]>([
    ['echoed the nonce', ran(0, `${NONCE}\n`), { kind: 'polled', poll: live, canary: 'answered' }],
    ['echoed amid other lines', ran(0, `motd\r\n${NONCE}\r\n`), { kind: 'polled', poll: live, canary: 'answered' }],
    ['wrong nonce', ran(0, 'lanes-canary-0000\n'), { kind: 'polled', poll: live, canary: 'silent' }],
    ['nonce only as a substring', ran(0, `x${NONCE}x\n`), { kind: 'polled', poll: live, canary: 'silent' }],
    ['empty output', ran(0, ''), { kind: 'polled', poll: live, canary: 'silent' }],
    ['nonce but non-zero exit', ran(1, `${NONCE}\n`), { kind: 'polled', poll: live, canary: 'silent' }],
    ['missed its deadline', ran(137, '', true), { kind: 'polled', poll: live, canary: 'silent' }],
    ['missed its deadline after echoing', ran(137, `${NONCE}\n`, true), { kind: 'polled', poll: live, canary: 'silent' }],
    [
      'exec threw provider-unavailable',
      { kind: 'threw', error: 'provider-unavailable', message: 'ECONNRESET' },
      { kind: 'probe-failed', error: 'provider-unavailable', message: 'ECONNRESET' },
    ],
    ['exec threw sandbox-gone', { kind: 'threw', error: 'sandbox-gone', message: 'gone' }, { kind: 'probe-failed', error: 'sandbox-gone', message: 'gone' }],
    ['exec threw other', { kind: 'threw', error: 'other', message: '?' }, { kind: 'probe-failed', error: 'other', message: '?' }],
  ])('%s', (_name, outcome, finding) => {
    const r = readCanary(outcome, NONCE);
    expect(r.finding).toEqual(finding);
    expect(r.reason).toBeTruthy();
  });
});

describe('planSecondCanary (slow is not silent)', () => {
  const live = { kind: 'polled', poll: { state: 'live' } } as const;
  it.each<[string, Parameters<typeof planSecondCanary>[0], 'accept' | 'second']>([
    ['answered', { finding: { ...live, canary: 'answered' }, reason: 'r' }, 'accept'],
    ['wrong output is silence, not lateness', { finding: { ...live, canary: 'silent' }, reason: 'r' }, 'accept'],
    ['missed its deadline', { finding: { ...live, canary: 'silent' }, reason: 'r', missedDeadline: true }, 'second'],
    ['the exec threw', { finding: { kind: 'probe-failed', error: 'provider-unavailable', message: 'm' }, reason: 'r' }, 'accept'],
  ])('%s → %s', (_name, reading, action) => {
    const plan = planSecondCanary(reading, { canaryTimeoutMs: 1_000 });
    expect(plan.action).toBe(action);
    if (plan.action === 'second') expect(plan.canaryTimeoutMs).toBe(1_000 * SECOND_CANARY_DEADLINE_FACTOR);
  });

  it('readCanary marks only a deadline miss as late', () => {
    expect(readCanary(ran(137, '', true), NONCE).missedDeadline).toBe(true);
    expect(readCanary(ran(1, 'nope'), NONCE).missedDeadline).toBeUndefined();
  });
});
