import { ProviderInvalidError, ProviderUnavailableError, type LanesError, defaults } from '@lanes/contracts';
import type { PollResult } from '@lanes/contracts';
import { CommandLifecycle } from '../command-lifecycle.js';
import { DeadlineExceeded, withDeadline } from '../deadline.js';
import { cancelledBeforeStart } from '../exec-result.js';
import { ReadPacer } from '../read-budget.js';
import type { ModalExecParamsLike, ModalProcessLike, ModalReadStreamLike, ModalSandboxLike } from './modal-client.js';
import { MODAL_PROVIDER_NAME } from './modal-errors.js';
import { killArgv, wrapArgv } from './modal-exec-scripts.js';
import { LivenessWatch, goneFromPoll, type FinishedPoll } from './modal-liveness.js';
import { mayRetry, readRouterError } from './modal-router-error.js';
import { sdkTimeoutMs } from './modal-timeouts.js';
import type { ExecOptions, ExecResult, OutputStream } from '../provider.js';

/** How a running command learns about its sandbox and its timing knobs (one per sandbox handle). */
export interface ModalExecContext {
  readonly sandbox: ModalSandboxLike;
  readonly sandboxId: string;
  readonly workdir: string;
  /** The handle's poll: it still works after the handle detached its SDK object. */
  poll(): Promise<PollResult>;
  newExecId(): string;
  now(): number;
  /** Period of the liveness poll raced against `wait()`. */
  readonly livenessPollIntervalMs: number;
  /** Added to deadline + kill escalation to get the SDK's backstop `timeoutMs`. */
  readonly backstopMarginMs: number;
  /** After the command exits, how long its output streams may take to reach EOF. */
  readonly outputDrainMs: number;
  /** Output kept per stream (the tail); live output via onOutput is not capped. */
  readonly maxOutputChars: number;
  /** How fast a command's output is read, stdout and stderr together (SANDBOX_OUTPUT_MAX_BYTES_PER_S). */
  readonly outputBytesPerS: number;
}

/**
 * Output tail kept per stream for one command; default: the context's maxOutputChars. `unpaced`:
 * read as fast as it comes, for lanes' own commands whose output is bounded by construction (a file
 * read prints at most its cap); an agent's command is always read at the output budget.
 */
export interface OutputChars {
  stdout?: number;
  stderr?: number;
  unpaced?: boolean;
}

/** Kill execs tried before concluding the group cannot be killed. */
const MAX_KILL_ATTEMPTS = 3;

/**
 * `error`: wait() failed (read by the router rule: never gone unless a poll said so); `stuck`: our
 * kill ran out of attempts and the command still had not ended; `gone`: the liveness poll's finding.
 */
type Outcome = { kind: 'exit'; code: number } | { kind: 'error'; error: LanesError } | { kind: 'stuck'; error: ProviderUnavailableError } | { kind: 'gone'; found: FinishedPoll };

/** Reads one output stream to the end (or until cancelled), keeping the tail, at the pace `pacer` allows. */
class Collector {
  text = '';
  readonly done: Promise<void>;
  readonly #reader: ReadableStreamDefaultReader<string>;

  constructor(stream: ModalReadStreamLike<string>, name: OutputStream, max: number, pacer: ReadPacer, onOutput?: ExecOptions['onOutput']) {
    const reader = stream.getReader();
    this.#reader = reader;
    this.done = (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return;
        onOutput?.(name, value);
        this.text += value;
        if (this.text.length > max) this.text = this.text.slice(this.text.length - max);
        await pacer.took(Buffer.byteLength(value));
      }
    })().catch(() => {
      // A broken output stream must not turn a finished command into an error: the exit code rules.
    });
  }

  cancel(): void {
    this.#reader.cancel().catch(() => {});
  }
}

/** Resolves true when `p` settles within `ms`, false when the time runs out first. */
async function settlesWithin(p: Promise<unknown>, ms: number): Promise<boolean> {
  try {
    await withDeadline(p, ms);
    return true;
  } catch (err) {
    return !(err instanceof DeadlineExceeded);
  }
}

function cancelStreams(proc: ModalProcessLike): void {
  for (const s of [proc.stdout, proc.stderr]) s.cancel().catch(() => {});
}

/**
 * Kills one command's process tree through a second exec (the SDK has no per-process kill):
 * SIGINT → grace → SIGTERM → grace → SIGKILL, including /proc members that escaped the group.
 * Retries while the command is still running; stops early when the sandbox turns out gone (the
 * liveness race reports that).
 */
async function killGroup(ctx: ModalExecContext, execId: string, graceMs: number, exited: Promise<unknown>): Promise<void> {
  const killBackstopMs = 4 * graceMs + ctx.backstopMarginMs;
  for (let attempt = 0; attempt < MAX_KILL_ATTEMPTS; attempt++) {
    try {
      const killer = await ctx.sandbox.exec(killArgv(execId, graceMs), { timeoutMs: sdkTimeoutMs('kill exec timeoutMs', killBackstopMs) });
      cancelStreams(killer);
      await withDeadline(killer.wait(), killBackstopMs);
    } catch (err) {
      if ((await readRouterError(err, ctx.sandboxId, ctx.poll)).kind === 'gone') return;
      // Transport trouble, a stuck kill exec, or a router "gone" the poll did not confirm: try
      // again while the command still runs.
    }
    if (await settlesWithin(exited, graceMs)) return;
  }
}

/**
 * After the exec channel failed in transport, the command itself may still run in a healthy
 * sandbox: the kill script (by exec id) ends its group and exits 0 only once nothing of it is left.
 * True when confirmed stopped (or the sandbox is confirmed gone, so nothing runs); false when every
 * attempt failed. Each attempt is bounded as a whole: the SDK retries a refused exec start for ~10 s.
 */
async function confirmStopped(ctx: ModalExecContext, execId: string, graceMs: number): Promise<boolean> {
  const killBackstopMs = 4 * graceMs + ctx.backstopMarginMs;
  for (let attempt = 0; attempt < MAX_KILL_ATTEMPTS; attempt++) {
    try {
      const code = await withDeadline(
        (async () => {
          const killer = await ctx.sandbox.exec(killArgv(execId, graceMs), { timeoutMs: sdkTimeoutMs('kill exec timeoutMs', killBackstopMs) });
          cancelStreams(killer);
          return killer.wait();
        })(),
        killBackstopMs,
      );
      if (code === 0) return true;
    } catch (err) {
      if ((await readRouterError(err, ctx.sandboxId, ctx.poll)).kind === 'gone') return true;
    }
  }
  return false;
}

/**
 * Starts the wrapped command. A router "gone" for a sandbox that polls live (readRouterError) is not
 * a finding: once the refused start is confirmed not running (the kill script by exec id exits 0),
 * it is tried again, up to ROUTER_NOT_FOUND_RETRIES times; after that the caller gets the
 * ProviderUnavailableError, for the supervisor's poll and canary. A confirmed "gone" throws
 * SandboxGoneError with what the poll found.
 */
async function startCommand(
  ctx: ModalExecContext,
  execId: string,
  argv: readonly string[],
  params: ModalExecParamsLike,
  graceMs: number,
  endLeftovers: boolean,
): Promise<ModalProcessLike> {
  for (let tries = 1; ; tries++) {
    try {
      return await ctx.sandbox.exec(wrapArgv(execId, argv, endLeftovers), params);
    } catch (err) {
      const reading = await readRouterError(err, ctx.sandboxId, ctx.poll);
      if (!mayRetry(reading, tries) || !(await confirmStopped(ctx, execId, graceMs))) throw reading.error;
    }
  }
}

/**
 * Waits for the command's exit. A wait the router answered "gone" for while the sandbox polls live
 * is waited again (the command may well still run: killing it would throw its work away), up to
 * ROUTER_NOT_FOUND_RETRIES times; any other failure is the outcome, already read by the router rule.
 */
async function waitForExit(ctx: ModalExecContext, proc: ModalProcessLike): Promise<Outcome> {
  for (let tries = 1; ; tries++) {
    try {
      return { kind: 'exit', code: await proc.wait() };
    } catch (err) {
      const reading = await readRouterError(err, ctx.sandboxId, ctx.poll);
      if (!mayRetry(reading, tries)) return { kind: 'error', error: reading.error };
    }
  }
}

/**
 * Runs one command in a Modal sandbox (the queue guarantees one at a time per sandbox):
 * argv goes through the process-group wrapper, `wait()` is raced against periodic `poll()` so a
 * sandbox dying mid-command cannot hang it, and timeout/cancel kill the command's group, never the
 * sandbox. Throws SandboxGoneError when the sandbox died, ProviderUnavailableError on transport trouble.
 * `keep`: the output tail kept per stream, when one call needs its own bound (a file read sets
 * stdout's from its byte cap, so what the sandbox sends cannot grow the worker).
 */
export async function runModalCommand(ctx: ModalExecContext, argv: readonly string[], options: ExecOptions = {}, keep: OutputChars = {}): Promise<ExecResult> {
  if (argv.length === 0) throw new ProviderInvalidError(MODAL_PROVIDER_NAME, 'exec needs a program (argv is empty)');
  const startedAt = ctx.now();
  const graceMs = options.killGraceMs ?? defaults.DEFAULT_KILL_GRACE_MS;
  const execId = ctx.newExecId();
  // The SDK's own timeout only fires if our kill failed: deadline + full escalation + margin,
  // in the whole seconds the SDK accepts (a bad value throws ProviderInvalidError before any call).
  const backstopMs = options.timeoutMs === undefined ? undefined : sdkTimeoutMs('exec timeoutMs', options.timeoutMs + 3 * graceMs + ctx.backstopMarginMs);

  // Cancelled between leaving the queue and starting: never reaches the sandbox.
  if (options.signal?.aborted) return cancelledBeforeStart(ctx.now() - startedAt);

  // Watched from before the start: the SDK retries a dead task's exec start for ~10 s.
  const watch = new LivenessWatch(() => ctx.poll(), ctx.livenessPollIntervalMs);
  let proc: ModalProcessLike;
  try {
    const starting = startCommand(
      ctx,
      execId,
      argv,
      {
        workdir: options.cwd ?? ctx.workdir,
        ...(options.env ? { env: { ...options.env } } : {}),
        ...(backstopMs !== undefined ? { timeoutMs: backstopMs } : {}),
      },
      graceMs,
      options.endLeftovers === true,
    );
    const first = await Promise.race([starting, watch.gone]);
    if (!('wait' in first)) {
      starting.then(cancelStreams, () => {});
      throw goneFromPoll(ctx.sandboxId, first, 'while a command was starting');
    }
    proc = first;
  } catch (err) {
    watch.stop();
    // startCommand read its own failure by the router rule.
    throw err;
  }

  // An agent that prints as fast as it can is read at the host's budget, as a local sandbox is.
  const pacer = new ReadPacer(ctx.outputBytesPerS);
  if (keep.unpaced) pacer.release();
  const stdout = new Collector(proc.stdout, 'stdout', keep.stdout ?? ctx.maxOutputChars, pacer, options.onOutput);
  const stderr = new Collector(proc.stderr, 'stderr', keep.stderr ?? ctx.maxOutputChars, pacer, options.onOutput);
  const exited = waitForExit(ctx, proc);
  void exited.then(() => pacer.release());

  let settle!: (o: Outcome) => void;
  const interrupted = new Promise<Outcome>((resolve) => (settle = resolve));
  let killing: Promise<void> | undefined;
  // Deadline/cancel → kill exec (the escalation runs in the sandbox) → backstop → settle.
  const lifecycle = new CommandLifecycle(
    { timeoutMs: options.timeoutMs, signal: options.signal, backstopMs: ctx.outputDrainMs },
    {
      kill: () => (killing ??= killGroup(ctx, execId, graceMs, exited)),
      // Every kill attempt ran and the command still has not ended: the exec channel is stuck.
      backstop: () => settle({ kind: 'stuck', error: new ProviderUnavailableError(MODAL_PROVIDER_NAME, `command ${execId} did not end after its process group was killed`) }),
    },
  );
  lifecycle.start();

  let outcome: Outcome;
  try {
    // The liveness race: the SDK's exec-wait retries forever against a dead sandbox.
    outcome = await Promise.race([exited, interrupted, watch.gone.then((found): Outcome => ({ kind: 'gone', found }))]);
  } finally {
    watch.stop();
    lifecycle.settle();
  }

  if (outcome.kind !== 'exit') {
    stdout.cancel();
    stderr.cancel();
    if (outcome.kind === 'gone') throw goneFromPoll(ctx.sandboxId, outcome.found, 'while running a command');
    if (outcome.kind === 'stuck') throw outcome.error;
    const error = outcome.error;
    // Transport lost the command, not the command ending: stop it by exec id before anyone can
    // start the next attempt in this sandbox (the caller re-runs a transport failure).
    if (error instanceof ProviderUnavailableError && !(await confirmStopped(ctx, execId, graceMs))) {
      throw new ProviderUnavailableError(MODAL_PROVIDER_NAME, `${error.message}; command ${execId} could not be confirmed stopped`);
    }
    throw error;
  }
  // The group is dead once the command exited, but let the kill exec finish so the next command
  // cannot race its last sweep.
  if (lifecycle.killing) await settlesWithin(lifecycle.killing, 4 * graceMs + ctx.backstopMarginMs);
  // Output can outlive the exit briefly (or forever, if a background process holds the pipe).
  if (!(await settlesWithin(Promise.all([stdout.done, stderr.done]), ctx.outputDrainMs))) {
    stdout.cancel();
    stderr.cancel();
  }
  return {
    exitCode: outcome.code,
    stdout: stdout.text,
    stderr: stderr.text,
    timedOut: lifecycle.timedOut,
    cancelled: lifecycle.cancelled,
    durationMs: ctx.now() - startedAt,
  };
}
