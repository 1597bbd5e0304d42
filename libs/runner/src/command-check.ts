import { SandboxGoneError, ProviderUnavailableError, type ObservedExitCode, type Verdict } from '@lanes/contracts';
import type { ExecOptions, ExecResult, SandboxHandle } from '@lanes/sandbox';
import {
  canaryCommand,
  classify,
  planProbe,
  planSecondCanary,
  readCanary,
  suspectOf,
  type CanaryReading,
  type CommandOutcome,
  type ProbeFinding,
  type ProbePlan,
  type ProviderErrorKind,
} from '@lanes/supervision';

export interface CheckedCommand {
  outcome: CommandOutcome;
  result?: ExecResult;
  verdict: Verdict;
  /** The exec's transport failed and the sandbox answered: re-run without spending an attempt. */
  transportFailed: boolean;
  observedExitCode: ObservedExitCode;
  reason: string;
  /** The probe's canary, when the poll said live and one ran: the slot counts failed ones toward death. */
  canary?: CanaryReading;
}

export interface CheckDeps {
  newNonce: () => string;
  canaryTimeoutMs: number;
}

/** Error classes → the supervision vocabulary, by class, never by message. */
export function errorKind(err: unknown): ProviderErrorKind {
  if (err instanceof SandboxGoneError) return 'sandbox-gone';
  if (err instanceof ProviderUnavailableError) return 'provider-unavailable';
  return 'other';
}

export function execOutcome(handle: SandboxHandle, argv: readonly string[], options: ExecOptions): Promise<{ outcome: CommandOutcome; result?: ExecResult }> {
  return callOutcome(() => handle.exec(argv, options));
}

/** What any command-like call of a handle (exec, resetDirs) came to, thrown errors mapped by class. */
async function callOutcome(call: () => Promise<ExecResult>): Promise<{ outcome: CommandOutcome; result?: ExecResult }> {
  try {
    const result = await call();
    return {
      result,
      outcome: { kind: 'exited', exitCode: result.exitCode, stdout: result.stdout, stderr: result.stderr, timedOut: result.timedOut, cancelled: result.cancelled },
    };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    const seen = err instanceof SandboxGoneError && err.observedExitCode !== undefined ? { observedExitCode: err.observedExitCode } : {};
    return { outcome: { kind: 'threw', error: errorKind(err), message, ...seen } };
  }
}

/**
 * Probes a suspect sandbox once: poll(), then a nonce canary only when it says live.
 * The finding is what classify reads, so the exit code observed here is the one recorded.
 */
export async function probe(handle: SandboxHandle, deps: CheckDeps): Promise<ProbeFinding> {
  return (await probeReading(handle, deps)).finding;
}

/** probe(), keeping the canary's reading when one ran (the poll said live). */
async function probeReading(handle: SandboxHandle, deps: CheckDeps): Promise<{ finding: ProbeFinding; canary?: CanaryReading }> {
  const polled = await pollOnce(handle);
  if (polled.kind !== 'polled' || polled.poll.state !== 'live') return { finding: polled };
  const canary = await runCanary(handle, deps);
  return { finding: canary.finding, canary };
}

/** One poll() as a finding: what it said, or the class of error it threw (which the breaker reads). */
async function pollOnce(handle: SandboxHandle): Promise<ProbeFinding> {
  try {
    return { kind: 'polled', poll: await handle.poll() };
  } catch (err) {
    return { kind: 'probe-failed', error: errorKind(err), message: err instanceof Error ? err.message : String(err) };
  }
}

/** What the plan calls for: a full probe, one poll, or nothing (the finding is then the plan's, or none). */
async function carryOut(handle: SandboxHandle, plan: ProbePlan, deps: CheckDeps): Promise<{ finding: ProbeFinding; canary?: CanaryReading }> {
  switch (plan.action) {
    case 'probe':
      return probeReading(handle, deps);
    case 'poll':
      return { finding: await pollOnce(handle) };
    case 'seen':
      return { finding: plan.finding };
    case 'skip':
      return { finding: { kind: 'not-probed' } };
  }
}

/**
 * The nonce canary, written once for every caller (probe, a new sandbox's readiness, the breaker's
 * half-open probe): `echo <nonce>` with a deadline, and a second, longer one when the first was
 * only late (slow is not silent).
 */
export async function runCanary(handle: SandboxHandle, deps: CheckDeps): Promise<CanaryReading> {
  const once = async (timeoutMs: number): Promise<CanaryReading> => {
    const nonce = deps.newNonce();
    const { outcome } = await execOutcome(handle, canaryCommand(nonce), { timeoutMs });
    return readCanary(outcome, nonce);
  };
  const first = await once(deps.canaryTimeoutMs);
  const plan = planSecondCanary(first, { canaryTimeoutMs: deps.canaryTimeoutMs });
  if (plan.action === 'accept') return first;
  const second = await once(plan.canaryTimeoutMs);
  return { ...second, reason: `${plan.reason}; second canary: ${second.reason}` };
}

/** Runs one command and reads it the way the supervisor does (rules 1 and 2). */
export function checkedExec(handle: SandboxHandle, argv: readonly string[], options: ExecOptions, deps: CheckDeps): Promise<CheckedCommand> {
  return checkedCall(handle, () => handle.exec(argv, options), deps);
}

/** checkedExec for any command-like call of the handle (resetDirs): its failures are read the same way. */
export async function checkedCall(handle: SandboxHandle, call: () => Promise<ExecResult>, deps: CheckDeps): Promise<CheckedCommand> {
  const { outcome, result } = await callOutcome(call);
  const plan = planProbe(suspectOf(outcome), { canaryTimeoutMs: deps.canaryTimeoutMs }, outcome);
  const probed = await carryOut(handle, plan, deps);
  const c = classify(outcome, probed.finding);
  const canary = probed.canary ? { canary: probed.canary } : {};
  return { outcome, result, verdict: c.verdict, transportFailed: c.transportFailed, observedExitCode: c.observedExitCode, reason: c.reason, ...canary };
}
