import { posix } from 'node:path';
import { AgentFileError, SandboxGoneError, agentLimits, type PollResult } from '@lanes/contracts';
import { ExecQueue } from '../exec-queue.js';
import { withCallDeadline } from './modal-call-deadline.js';
import type { ModalClientLike, ModalSandboxLike } from './modal-client.js';
import { MODAL_PROVIDER_NAME, toLanesError, isGone } from './modal-errors.js';
import { mayRetry, readRouterError } from './modal-router-error.js';
import { runModalCommand, type ModalExecContext } from './modal-exec.js';
import { raceLiveness } from './modal-liveness.js';
import type { ExecOptions, ExecResult, ReadFileOptions, ResetDirsOptions, SandboxHandle } from '../provider.js';
import { readFileArgv } from './modal-exec-scripts.js';
import { READ_FILE_STDERR_CHARS, parseFileRead, readFileOutputChars } from './modal-read-file.js';
import { resetDirsArgv, resetResult, resetTargets } from '../reset-dirs.js';

export interface ModalHandleTiming {
  livenessPollIntervalMs: number;
  backstopMarginMs: number;
  outputDrainMs: number;
  maxOutputChars: number;
  outputBytesPerS: number;
  fileOpTimeoutMs: number;
  callTimeoutMs: number;
}

export interface ModalHandleDeps {
  client: ModalClientLike;
  now(): number;
  newExecId(): string;
}

/**
 * One Modal sandbox. Commands are serialized by the shared ExecQueue; file reads/writes and poll()
 * do not queue behind a running command (DESIGN failure 4: the control channel must not freeze).
 */
export class ModalSandboxHandle implements SandboxHandle {
  readonly id: string;
  readonly provider = MODAL_PROVIDER_NAME;
  readonly workdir: string;
  /** Made only by ModalProvider.create, once its connect canary echoed the nonce. */
  readonly passedCanaryAtCreate = true;
  /** The reset is a command and the write the SDK's filesystem call: neither waits for the other. */
  readonly writeBesideReset = true;
  readonly #sandbox: ModalSandboxLike;
  readonly #deps: ModalHandleDeps;
  readonly #queue: ExecQueue;
  readonly #timing: ModalHandleTiming;
  readonly #execContext: ModalExecContext;
  /** Set once this handle terminated the sandbox; the SDK object is detached from then on. */
  #terminated = false;
  /**
   * Set while terminate() runs (and after it succeeded): a command that ends from then on ended by
   * lanes' own terminate, which Modal may report as its exit status (137) rather than an error.
   */
  #terminating = false;
  /**
   * Set once this handle's poll() has seen the sandbox finished (asked directly, by a command's
   * liveness race, or to confirm a router's "gone"). Only that finding sets it: a command router's
   * NOT_FOUND alone never does (readRouterError), so the supervisor's canary after one still runs.
   * A finished Modal sandbox never runs again, so later calls fail at once: the real SDK would send
   * them to the dead task's command router and retry its silence for seconds.
   */
  #gone: SandboxGoneError | undefined;
  /**
   * What a poll found once the sandbox was finished (exited with its code, or missing). Modal never
   * changes a finished sandbox's result, so later polls answer from here with no network call: the
   * exit code seen while a command ran is the one recovery reads.
   */
  #finished: PollResult | undefined;

  constructor(sandbox: ModalSandboxLike, workdir: string, timing: ModalHandleTiming, deps: ModalHandleDeps) {
    this.id = sandbox.sandboxId;
    this.workdir = workdir;
    this.#sandbox = sandbox;
    this.#deps = deps;
    this.#timing = timing;
    const ctx: ModalExecContext = {
      sandbox,
      sandboxId: this.id,
      workdir,
      poll: () => this.poll(),
      // Prefixed with the sandbox's id: the wrapper's leftover sweep ends this sandbox's marked processes only (modal-exec-scripts.ts).
      newExecId: () => `${this.id}:${deps.newExecId()}`,
      now: deps.now,
      ...timing,
    };
    this.#execContext = ctx;
    this.#queue = new ExecQueue((argv, options) => runModalCommand(ctx, argv, options), { now: deps.now });
  }

  async exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    this.#throwIfFinished();
    try {
      const result = await this.#queue.exec(argv, options);
      // Ended under lanes' own terminate: that is this handle's finding, whatever the exit status says.
      if (this.#terminating) throw new SandboxGoneError(this.id, `terminated by lanes while the command ran (exit ${result.exitCode})`);
      return result;
    } catch (err) {
      // A command's SandboxGoneError is a poll's finding (poll() has cached it for every later
      // call): everything queued behind learns it now.
      if (err instanceof SandboxGoneError) this.#queue.rejectQueued(err);
      throw err;
    }
  }

  #throwIfFinished(): void {
    if (this.#terminated) throw new SandboxGoneError(this.id, 'terminated by lanes');
    if (this.#gone) throw this.#gone;
  }

  async poll(): Promise<PollResult> {
    if (this.#finished) return this.#finished;
    // After terminate() the SDK object is detached; a fresh one from fromId (no I/O) can still ask.
    const sandbox = this.#terminated ? await this.#deps.client.sandboxes.fromId(this.id) : this.#sandbox;
    try {
      const code = await withCallDeadline(`poll ${this.id}`, sandbox.poll(), this.#timing.callTimeoutMs);
      if (code === null) return { state: 'live' };
      this.#gone ??= new SandboxGoneError(this.id, `exited(${code})`);
      this.#finished ??= { state: 'exited', exitCode: code };
      return this.#finished;
    } catch (err) {
      const mapped = toLanesError(err, { kind: 'sandbox', sandboxId: this.id });
      if (mapped instanceof SandboxGoneError) {
        this.#gone ??= mapped;
        this.#finished ??= { state: 'missing' };
        return this.#finished;
      }
      throw mapped;
    } finally {
      if (sandbox !== this.#sandbox) sandbox.detach();
    }
  }

  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    this.#throwIfFinished();
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    // The SDK's filesystem API is an exec of its helper through the command router: its failures
    // are read by the same rule as a command's (readRouterError). It folds transport trouble into
    // its NotFoundError too, so only the poll behind that rule may say gone; a write is idempotent,
    // so one the router refused on a live sandbox is tried again like a command's start.
    // Raced against the liveness poll as a command is: the helper's exec wait on a task that died
    // under it is retried by the SDK until the deadline, and the card's start would wait that long.
    for (let tries = 1; ; tries++) {
      try {
        const writing = withCallDeadline(`write ${path}`, this.#sandbox.filesystem.writeBytes(bytes, this.#resolve(path)), this.#timing.fileOpTimeoutMs);
        await raceLiveness(writing, () => this.poll(), this.#timing.livenessPollIntervalMs, this.id, `while writing ${path}`);
        return;
      } catch (err) {
        if (err instanceof SandboxGoneError) throw err;
        const reading = await readRouterError(err, this.id, () => this.poll());
        if (!mayRetry(reading, tries)) throw reading.error;
      }
    }
  }

  /**
   * A file an agent left, in one command that walks the path (no link on the way), reads only a
   * regular file and sends at most maxBytes + 1 bytes of it (READ_FILE_SCRIPT), under the file
   * deadline; its output is collected up to that bound only. Not the SDK's readBytes: that follows
   * links, blocks on a FIFO, and collects whatever the sandbox sends before any cap could apply.
   */
  async readFile(path: string, options: ReadFileOptions = {}): Promise<Uint8Array | undefined> {
    this.#throwIfFinished();
    const maxBytes = options.maxBytes ?? agentLimits.DEFAULT_MAX_RESULT_BYTES;
    // Normalized: an absolute path with `..` in it must not pass the workdir test below.
    const target = posix.normalize(this.#resolve(path));
    const name = posix.basename(target);
    if (!target.startsWith(`${this.workdir}/`)) throw new AgentFileError(name, 'outside-workdir', `is outside the sandbox workdir ${this.workdir}`);
    const relative = target.slice(this.workdir.length + 1);
    const maxChars = readFileOutputChars(relative, maxBytes);
    // Not queued behind a running command, like the SDK's own file calls (DESIGN failure 4). One
    // character over the bound is kept, so an answer past it is seen as such.
    const keep = { stdout: maxChars + 1, stderr: READ_FILE_STDERR_CHARS, unpaced: true };
    const read = await runModalCommand(this.#execContext, readFileArgv(this.workdir, relative, maxBytes), { timeoutMs: this.#timing.fileOpTimeoutMs }, keep);
    return parseFileRead(name, read, maxBytes, maxChars);
  }

  /** One command in the sandbox (its files are only reachable through a process); the paths are argv. */
  async resetDirs(paths: readonly string[], options: ResetDirsOptions = {}): Promise<ExecResult> {
    this.#throwIfFinished();
    const targets = resetTargets(this.provider, this.workdir, paths);
    const removals = resetTargets(this.provider, this.workdir, options.remove ?? []);
    if (targets.length + removals.length === 0) return resetResult(this.#deps.now(), this.#deps.now());
    const { remove: _remove, ...execOptions } = options;
    return this.exec(resetDirsArgv(targets, removals), execOptions);
  }

  async terminate(): Promise<void> {
    if (this.#terminated) return;
    this.#terminating = true;
    try {
      await withCallDeadline(`terminate ${this.id}`, this.#sandbox.terminate(), this.#timing.callTimeoutMs);
    } catch (err) {
      if (!isGone(err, this.id)) {
        this.#terminating = false;
        throw toLanesError(err, { kind: 'sandbox', sandboxId: this.id });
      }
    }
    this.#terminated = true;
    this.#queue.rejectQueued(new SandboxGoneError(this.id, 'terminated by lanes'));
    this.#sandbox.detach();
  }

  /** Relative paths are relative to the lanes workdir, as for commands. */
  #resolve(path: string): string {
    return posix.isAbsolute(path) ? path : posix.join(this.workdir, path);
  }
}
