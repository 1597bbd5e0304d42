import { describe, expect, it } from 'vitest';
import type { ObservedExitCode, Verdict } from '@lanes/contracts';
import { classify, type CommandOutcome, type ProbeFinding } from '@lanes/supervision';

const exited = (exitCode: number, over: Partial<Extract<CommandOutcome, { kind: 'exited' }>> = {}): CommandOutcome => ({
  kind: 'exited',
  exitCode,
  stdout: '',
  stderr: '',
  timedOut: false,
  cancelled: false,
  ...over,
});
const threw = (error: 'sandbox-gone' | 'provider-unavailable' | 'other'): CommandOutcome => ({ kind: 'threw', error, message: 'm' });

const notProbed: ProbeFinding = { kind: 'not-probed' };
const polledExited = (exitCode: number): ProbeFinding => ({ kind: 'polled', poll: { state: 'exited', exitCode } });
const missing: ProbeFinding = { kind: 'polled', poll: { state: 'missing' } };
const liveAnswered: ProbeFinding = { kind: 'polled', poll: { state: 'live' }, canary: 'answered' };
const liveSilent: ProbeFinding = { kind: 'polled', poll: { state: 'live' }, canary: 'silent' };
const liveNoCanary: ProbeFinding = { kind: 'polled', poll: { state: 'live' } };
const probeFailed = (error: 'sandbox-gone' | 'provider-unavailable' | 'other'): ProbeFinding => ({
  kind: 'probe-failed',
  error,
  message: 'probe error',
});

const bare1 = exited(1);
const hang = exited(137, { timedOut: true });
/** A command that printed, then its sandbox died under it: the provider reports the death as its status. */
const killedWithOutput = exited(137, { stdout: 'hi\n' });
const lifetimeWithOutput = exited(124, { stdout: 'working\n' });

describe('classify (rule 2)', () => {
  it.each<[string, CommandOutcome, ProbeFinding, Verdict, ObservedExitCode]>([
    // not suspect: the finding is not consulted
    ['exit 0', exited(0), notProbed, 'ok', 0],
    ['exit 0 with output', exited(0, { stdout: 'done' }), notProbed, 'ok', 0],
    ['exit 0 ignores a finding it did not ask for', exited(0), polledExited(137), 'ok', 0],
    ['exit 2, bare', exited(2), notProbed, 'command-failed', 2],
    ['exit 1 with stderr', exited(1, { stderr: 'test failed' }), notProbed, 'command-failed', 1],
    ['exit 75 (needs-human code) is the caller’s to read', exited(75), notProbed, 'command-failed', 75],
    ['user cancel, bare 137', exited(137, { cancelled: true }), notProbed, 'command-failed', 137],
    ['user cancel, 137 with output', exited(137, { cancelled: true, stdout: 'partial' }), notProbed, 'command-failed', 137],
    ['exit 127 with output ignores a finding', exited(127, { stderr: 'not found' }), polledExited(137), 'command-failed', 127],

    // death-exit (124, −1, ≥ 128, output or not): one poll decides; live lets the result stand
    ['137 with output, poll exited(137): dead', killedWithOutput, polledExited(137), 'sandbox-dead', 137],
    ['137 with output, poll exited(0): 0 stays 0', killedWithOutput, polledExited(0), 'sandbox-dead', 0],
    ['124 with output, poll exited(124): the lifetime ran out', lifetimeWithOutput, polledExited(124), 'sandbox-dead', 124],
    ['-1 with output, poll exited(-1)', exited(-1, { stderr: 'x' }), polledExited(-1), 'sandbox-dead', -1],
    ['143 with output, poll exited(137): the sandbox’s code, not the command’s', exited(143, { stdout: 'x' }), polledExited(137), 'sandbox-dead', 137],
    ['137 with output, poll missing', killedWithOutput, missing, 'sandbox-dead', 'unknown'],
    ['137 with output, poll live: the result stands as reported', killedWithOutput, liveNoCanary, 'command-failed', 137],
    ['124 with output, poll live: stands', lifetimeWithOutput, liveNoCanary, 'command-failed', 124],
    ['bare 143, poll live: stands', exited(143), liveNoCanary, 'command-failed', 143],
    ['-1 with output, poll live: stands', exited(-1, { stdout: 'x' }), liveNoCanary, 'command-failed', -1],
    ['137 with output, poll unavailable: the breaker path', killedWithOutput, probeFailed('provider-unavailable'), 'provider-outage', 'unknown'],
    ['137 with output, poll says gone', killedWithOutput, probeFailed('sandbox-gone'), 'sandbox-dead', 'unknown'],
    ['137 with output, poll failed otherwise: unknown never destroys', killedWithOutput, probeFailed('other'), 'command-failed', 'unknown'],
    ['137 with output, not probed: unknown never destroys', killedWithOutput, notProbed, 'command-failed', 'unknown'],

    // suspect + polled exited(code): dead, the code kept — 0 stays 0
    ['bare 1, poll exited(137)', bare1, polledExited(137), 'sandbox-dead', 137],
    ['bare 1, poll exited(1)', bare1, polledExited(1), 'sandbox-dead', 1],
    ['bare 1, poll exited(0): 0 stays 0', bare1, polledExited(0), 'sandbox-dead', 0],
    ['hang, poll exited(0): 0 stays 0', hang, polledExited(0), 'sandbox-dead', 0],
    ['threw, poll exited(0): 0 stays 0', threw('sandbox-gone'), polledExited(0), 'sandbox-dead', 0],
    ['bare -1, poll exited(-1)', exited(-1), polledExited(-1), 'sandbox-dead', -1],

    // suspect + missing
    ['bare 1, poll missing', bare1, missing, 'sandbox-dead', 'unknown'],
    ['threw, poll missing', threw('provider-unavailable'), missing, 'sandbox-dead', 'unknown'],

    // suspect + live + canary
    ['bare 1, live, canary answered: the command’s own code', bare1, liveAnswered, 'command-failed', 1],
    ['bare 137, live, canary answered', exited(137), liveAnswered, 'command-failed', 137],
    ['hang, live, canary answered', hang, liveAnswered, 'command-failed', 137],
    ['threw, live, canary answered: nothing exited', threw('other'), liveAnswered, 'command-failed', 'unknown'],
    ['bare 1, live, canary silent: wedged', bare1, liveSilent, 'sandbox-dead', 'unknown'],
    ['hang, live, canary silent: wedged', hang, liveSilent, 'sandbox-dead', 'unknown'],
    ['bare 1, live, no canary run: inconclusive', bare1, liveNoCanary, 'command-failed', 'unknown'],

    // suspect + probe failed
    ['bare 1, probe provider-unavailable', bare1, probeFailed('provider-unavailable'), 'provider-outage', 'unknown'],
    ['threw, probe provider-unavailable', threw('provider-unavailable'), probeFailed('provider-unavailable'), 'provider-outage', 'unknown'],
    ['bare 1, probe sandbox-gone', bare1, probeFailed('sandbox-gone'), 'sandbox-dead', 'unknown'],
    // exec's own "gone" is an explicit finding: a poll that cannot reach the provider does not turn it into an outage
    ['threw sandbox-gone, probe provider-unavailable: the exec finding stands', threw('sandbox-gone'), probeFailed('provider-unavailable'), 'sandbox-dead', 'unknown'],
    ['threw sandbox-gone, probe other', threw('sandbox-gone'), probeFailed('other'), 'command-failed', 'unknown'],
    ['bare 1, probe other: unknown never destroys', bare1, probeFailed('other'), 'command-failed', 'unknown'],

    // suspect, not probed: unknown never destroys
    ['bare 1, not probed', bare1, notProbed, 'command-failed', 'unknown'],
    ['hang, not probed', hang, notProbed, 'command-failed', 'unknown'],
    ['threw sandbox-gone, not probed', threw('sandbox-gone'), notProbed, 'command-failed', 'unknown'],
  ])('%s → %s / %s', (_name, outcome, finding, verdict, observed) => {
    const c = classify(outcome, finding);
    expect(c.verdict).toBe(verdict);
    expect(c.observedExitCode).toBe(observed);
    expect(c.reason).toBeTruthy();
  });

  it.each<[string, CommandOutcome, ProbeFinding, boolean]>([
    ['exec threw unavailable, live, canary answered: transport, no attempt spent', threw('provider-unavailable'), liveAnswered, true],
    ['exec threw other, live, canary answered: not transport', threw('other'), liveAnswered, false],
    ['bare exit 1, live, canary answered: the command ran and failed', bare1, liveAnswered, false],
    ['exec threw unavailable, canary silent: dead, not transport', threw('provider-unavailable'), liveSilent, false],
    ['exec threw unavailable, probe unavailable: outage, not transport', threw('provider-unavailable'), probeFailed('provider-unavailable'), false],
  ])('transportFailed: %s → %s', (_name, outcome, finding, transport) => {
    expect(classify(outcome, finding).transportFailed).toBe(transport);
  });

  it('keeps 0 as the number 0, not "unknown" or undefined', () => {
    const c = classify(bare1, polledExited(0));
    expect(c.observedExitCode).toStrictEqual(0);
    expect(Object.is(c.observedExitCode, 0)).toBe(true);
    expect(c.reason).toContain('exited(0)');
  });

  it('provider-outage is reachable only through a provider-unavailable probe failure', () => {
    const outcomes: CommandOutcome[] = [
      exited(0),
      exited(1),
      exited(2),
      exited(137),
      killedWithOutput,
      lifetimeWithOutput,
      hang,
      exited(1, { cancelled: true }),
      threw('sandbox-gone'),
      threw('provider-unavailable'),
      threw('other'),
    ];
    const findings: ProbeFinding[] = [
      notProbed,
      polledExited(0),
      polledExited(137),
      missing,
      liveAnswered,
      liveSilent,
      liveNoCanary,
      probeFailed('provider-unavailable'),
      probeFailed('sandbox-gone'),
      probeFailed('other'),
    ];
    for (const o of outcomes) {
      for (const f of findings) {
        const c = classify(o, f);
        const execSaidGone = o.kind === 'threw' && o.error === 'sandbox-gone';
        const viaProbeFailure = f.kind === 'probe-failed' && f.error === 'provider-unavailable' && c.suspect && !execSaidGone;
        expect(c.verdict === 'provider-outage').toBe(viaProbeFailure);
        expect(c.countsTowardBreaker).toBe(viaProbeFailure);
      }
    }
  });

  it('sandbox-dead needs an explicit finding (exited, missing, silent canary, or sandbox-gone)', () => {
    const inconclusive: ProbeFinding[] = [notProbed, liveNoCanary, probeFailed('other'), liveAnswered];
    for (const f of inconclusive) expect(classify(bare1, f).verdict).not.toBe('sandbox-dead');
  });

  it('reports whether the outcome was suspect', () => {
    expect(classify(exited(0), notProbed).suspect).toBe(false);
    expect(classify(bare1, notProbed).suspect).toBe(true);
    expect(classify(killedWithOutput, liveNoCanary).suspect).toBe(true);
  });

  it('a death-exit whose sandbox is live says the result stands; a bare exit polled live without a canary stays inconclusive', () => {
    expect(classify(killedWithOutput, liveNoCanary).reason).toMatch(/could be the sandbox's death.*live: the sandbox did not die, the result stands as reported/);
    expect(classify(exited(137), liveNoCanary)).toMatchObject({ verdict: 'command-failed', observedExitCode: 'unknown' });
  });
});
