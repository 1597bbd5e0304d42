import { agentLimits, type Card, type LaneConfig } from '@lanes/contracts';
import type { OutputStream, SandboxHandle } from '@lanes/sandbox';
import { cardEnv, withTraceparent } from './card-env.js';
import { cardPaths, type CardPaths } from './card-paths.js';
import { checkedCall, checkedExec, type CheckDeps, type CheckedCommand } from './command-check.js';
import type { RunOutcome, Step } from './run-outcome.js';
import { readAgentFiles } from './agent-files.js';
import { lastLine } from './cap-chars.js';
import { inStepSpan } from './step-span.js';
import { inSpan } from '@lanes/tracing';

/** The agent protocol: this exit code means "a human must look", like a blocked.json. */
export const NEEDS_HUMAN_EXIT_CODE = 75;

export interface RunInput {
  card: Card;
  lane: LaneConfig;
  attempt: number;
  /** The card this sandbox ran before, if another: its directory goes as this card's are reset, so a sandbox keeps at most one finished card's files. */
  previousCardId?: string;
  signal?: AbortSignal;
  /**
   * Whether an agent that ends with its own answer (exit 0, or 75) after `signal` was aborted keeps
   * that answer. True for a graceful shutdown: nobody asked this card to stop, so a run that
   * finished as the stop reached it is committed, not run again (DESIGN "No finished run is thrown
   * away"). Unset for a board's cancel, which ends the card cancelled whatever the agent answers.
   */
  answerOutlivesStop?: () => boolean;
  onOutput?: (stream: OutputStream, chunk: string) => void;
}

export interface RunDeps extends CheckDeps {
  handle: SandboxHandle;
}

/**
 * Materializes the card in the sandbox: clean output and work directories, the card file. Starts no
 * command of the card's. Resolves with the outcome that ends the run, or undefined when ready.
 */
export function prepareCard(deps: RunDeps, input: Pick<RunInput, 'card' | 'lane' | 'previousCardId'>): Promise<RunOutcome | undefined> {
  return prepare(deps, cardPaths(deps.handle.workdir, input.card.id), input);
}

/**
 * Runs one card in one sandbox: materialize it (or take `prepared`, a `prepareCard` of the same
 * card and sandbox already under way), run setup then the agent, and interpret the outcome. With
 * tracing on, the run is a `card.run` span and each command a `sandbox.exec` span under it.
 */
export function runCard(deps: RunDeps, input: RunInput, prepared?: Promise<RunOutcome | undefined>): Promise<RunOutcome> {
  const attributes = { 'lanes.card.id': input.card.id, 'lanes.lane': input.lane.name, 'lanes.attempt': input.attempt, 'lanes.sandbox.id': deps.handle.id };
  return inSpan('card.run', { attributes }, async (span) => {
    const outcome = await runSteps(deps, input, prepared);
    span?.setAttribute('lanes.outcome', outcome.kind);
    return outcome;
  });
}

async function runSteps(deps: RunDeps, input: RunInput, prepared?: Promise<RunOutcome | undefined>): Promise<RunOutcome> {
  const { handle } = deps;
  const { card, lane, attempt, signal, onOutput } = input;
  const paths = cardPaths(handle.workdir, card.id);
  const env = cardEnv(card, lane, paths, attempt);

  const stopped = await (prepared ?? prepare(deps, paths, input));
  if (stopped) return stopped;

  const steps: Array<{ step: Step; argv: string[]; timeoutMs: number }> = [
    ...lane.setup.map((argv, i) => ({ step: `setup[${i}]`, argv, timeoutMs: lane.setupTimeoutMs })),
    { step: 'agent', argv: lane.agent, timeoutMs: lane.commandTimeoutMs },
  ];
  let last: CheckedCommand | undefined;
  for (const { step, argv, timeoutMs } of steps) {
    last = await inStepSpan(handle, step, (traceparent) =>
      // The agent is the card's last command: what it leaves running ends with it (endLeftovers).
      checkedExec(
        handle,
        argv,
        { cwd: paths.workDir, env: withTraceparent(env, traceparent), timeoutMs, signal, killGraceMs: lane.killGraceMs, onOutput, endLeftovers: step === 'agent' },
        deps,
      ),
    );
    const stop = interruption(last, step);
    if (stop && !(step === 'agent' && stop.kind === 'cancelled' && answered(last) && input.answerOutlivesStop?.())) return stop;
    if (step !== 'agent' && last.verdict !== 'ok') return failed(last, step);
  }
  return interpretAgent(deps, paths, last!, lane.maxResultBytes);
}

/** Writes the card file and gives the attempt clean output and work directories. */
async function prepare(deps: RunDeps, paths: CardPaths, { card, lane, previousCardId }: Pick<RunInput, 'card' | 'lane' | 'previousCardId'>): Promise<RunOutcome | undefined> {
  const { handle } = deps;
  const remove = previousCardId !== undefined && previousCardId !== card.id ? [cardPaths(handle.workdir, previousCardId).dir] : [];
  const write = () => handle.writeFile(paths.cardFile, JSON.stringify(card, null, 2));
  // The card file lies beside the directories reset, never in them: where the provider can take
  // both at once (on Modal each is a command of its own), the card's start waits for one, not two.
  // Its failure is a value (false), never an unhandled rejection, whether or not it is awaited.
  const written = handle.writeBesideReset
    ? write().then(
        () => true,
        () => false,
      )
    : undefined;
  // Read like any command: a provider that resets without a process still answers as one.
  const reset = await checkedCall(
    handle,
    () => handle.resetDirs([paths.outputDir, paths.workDir], { timeoutMs: lane.setupTimeoutMs, killGraceMs: lane.killGraceMs, remove }),
    deps,
  );
  // A failed reset ends the run without waiting for the write beside it: in a sandbox that has
  // just died the SDK goes on retrying a write for seconds.
  const stop = interruption(reset, 'prepare');
  if (stop) return stop;
  if (reset.verdict !== 'ok') return failed(reset, 'prepare');
  // A write beside the reset that failed is made again after it, as without the overlap: it may
  // have met the reset's directories half made (Modal's helper is not ours to read).
  const wrote = await written;
  try {
    if (!wrote) await write();
  } catch (err) {
    // The sandbox was fine a moment ago; let the same check decide what a failed write means.
    const check = await checkedExec(handle, ['true'], { timeoutMs: lane.canaryTimeoutMs }, deps);
    return interruption(check, 'prepare') ?? { kind: 'failed', failedReason: 'command-failed', message: `could not write the card file: ${String(err)}`, step: 'prepare' };
  }
  return undefined;
}

/** Verdicts that end the run whatever the step: cancel, death, outage. */
function interruption(c: CheckedCommand, step: Step): RunOutcome | undefined {
  if (c.outcome.kind === 'exited' && c.outcome.cancelled && !c.outcome.timedOut) return { kind: 'cancelled', step };
  if (c.transportFailed) return { kind: 'interrupted', message: c.reason, step };
  switch (c.verdict) {
    case 'sandbox-dead':
      return { kind: 'sandbox-dead', observedExitCode: c.observedExitCode, message: c.reason, step };
    case 'provider-outage':
      return { kind: 'provider-outage', message: c.reason, step, ...(c.canary ? { canary: c.canary } : {}) };
    case 'ok':
    case 'command-failed':
      return undefined;
  }
}

/** The command ended by itself with an answer of the agent protocol, not a signal's code. */
function answered(c: CheckedCommand): boolean {
  return c.outcome.kind === 'exited' && !c.outcome.timedOut && (c.outcome.exitCode === 0 || c.outcome.exitCode === NEEDS_HUMAN_EXIT_CODE);
}

function failed(c: CheckedCommand, step: Step): RunOutcome {
  const o = c.outcome;
  if (o.kind === 'threw') return { kind: 'failed', failedReason: 'command-failed', message: `${step}: ${o.message}`, step };
  const tail = (o.stderr || o.stdout).slice(-agentLimits.MAX_MESSAGE_TAIL_CHARS).trim();
  if (o.timedOut) return { kind: 'failed', failedReason: 'timeout', exitCode: o.exitCode, message: `${step} timed out${tail ? `: ${tail}` : ''}`, step };
  return { kind: 'failed', failedReason: 'command-failed', exitCode: o.exitCode, message: `${step} exited ${o.exitCode}${tail ? `: ${tail}` : ''}`, step };
}

async function interpretAgent(deps: RunDeps, paths: CardPaths, agent: CheckedCommand, maxResultBytes: number): Promise<RunOutcome> {
  const o = agent.outcome;
  if (o.kind !== 'exited' || o.timedOut) return failed(agent, 'agent');
  const files = await readAgentFiles(deps.handle, paths, maxResultBytes);
  // A link, a FIFO, a file over the cap: the agent broke the protocol; the sandbox is fine.
  if (files.refused) return { kind: 'failed', failedReason: 'command-failed', exitCode: o.exitCode, message: files.refused, step: 'agent' };
  if (files.readError) {
    // What the agent decided is unknown: never a silent done. The same check as a failed card-file
    // write tells a dead sandbox or an outage from a sandbox that is fine.
    const check = await checkedExec(deps.handle, ['true'], { timeoutMs: deps.canaryTimeoutMs }, deps);
    const stop = interruption(check, 'agent');
    if (stop) return stop;
    if (files.readError.transient) return { kind: 'interrupted', message: files.readError.message, step: 'agent' };
    return { kind: 'failed', failedReason: 'command-failed', exitCode: o.exitCode, message: files.readError.message, step: 'agent' };
  }
  if (o.exitCode === NEEDS_HUMAN_EXIT_CODE || files.blocked) {
    const reason = files.blocked?.reason ?? (lastLine(o.stdout, agentLimits.MAX_BLOCK_REASON_CHARS) || 'the agent asked for a human');
    return { kind: 'needs-human', reason, exitCode: o.exitCode, step: 'agent' };
  }
  if (o.exitCode !== 0) return failed(agent, 'agent');
  if (files.resultError) {
    return { kind: 'failed', failedReason: 'command-failed', exitCode: 0, message: files.resultError, step: 'agent' };
  }
  return { kind: 'done', result: files.result, step: 'agent' };
}
