import { mkdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { basename, join, resolve } from 'node:path';
import type { PollResult } from '@lanes/contracts';
import { AgentFileError, IllegalStateError, ProviderInvalidError, ProviderUnavailableError, SandboxGoneError, agentLimits } from '@lanes/contracts';
import { KILL_SWEEP_LIMIT_MS } from '../../runtime/kill-escalation.mjs';
import { bestEffort, type CleanupErrorSink } from '../best-effort.js';
import { CappedText } from '../capped-text.js';
import { withDeadline } from '../deadline.js';
import { CommandLifecycle } from '../command-lifecycle.js';
import { ExecQueue } from '../exec-queue.js';
import { cancelledBeforeStart } from '../exec-result.js';
import { HostTrash, writeHostFile } from './host-files.js';
import { readBeneath } from './read-beneath.js';
import { shapeCardDirs } from './separate-uid.js';
import { reuseTree } from './tree-reuse.js';
import type { InitChannel } from './init-channel.js';
import { isAlive } from '../proc.js';
import type { ExecOptions, ExecResult, OutputStream, ReadFileOptions, ResetDirsOptions, SandboxHandle } from '../provider.js';
import { resetResult, resetTargets } from '../reset-dirs.js';
import { reapSandbox } from '../sandbox-reaper.js';
import type { SandboxRecord } from './sandbox-registry.js';

/**
 * live → exited (the root died on its own) | terminated (terminate() was called) | detached
 * (the provider was closed: the sandbox still runs, this process just stopped talking to it).
 */
export type LocalSandboxState = 'live' | 'exited' | 'terminated' | 'detached';

/** The root's exit event follows its death by a moment; poll() waits this long for it. */
const ROOT_EXIT_SETTLE_MS = 1_000;
/** Node's setTimeout overflows above 2^31-1 ms (and would fire at once), inside the init too. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/**
 * Once a command is being killed, a healthy init reports its end within 2 graces + its SIGKILL sweep
 * limit + a 100 ms stdio drain. Past that plus this slack the init is wedged, and exec fails rather
 * than hang, so the supervisor's probe (poll, then canary) gets to decide.
 */
const INIT_REPORT_SLACK_MS = 5_000;

export interface LocalSandboxParams {
  record: SandboxRecord;
  /** `<baseDir>/<id>`: removed on terminate. */
  dir: string;
  channel: InitChannel;
  /** Resolves with the root's exit code (128+signal when signalled) when it dies. */
  rootExited: Promise<number>;
  /** Stops this process's ties to the root (pipes, ref) without killing it. */
  detachRoot: () => void;
  /** Recent init stderr, for the error that reports a dead sandbox. */
  stderrTail: () => string;
  killGraceMs: number;
  /** The shell's start canary came back (start-canary.ts). */
  passedCanaryAtCreate: boolean;
  /** `separate-uid`: the uid the agent runs as; each card directory made is given to it (separate-uid.ts). */
  agentUid?: number;
  /** Per stream, the tail of the output kept in ExecResult; `onOutput` still sees everything. */
  maxOutputChars: number;
  now: () => number;
  onCleanupError?: CleanupErrorSink;
  /** Called once the sandbox is terminated, so the provider drops it. */
  onTerminated: (id: string) => void;
}

/** One local sandbox: a handle on a root process that runs every command through its init. */
export class LocalSandbox implements SandboxHandle {
  readonly provider = 'local';
  readonly id: string;
  readonly pid: number;
  readonly workdir: string;
  readonly passedCanaryAtCreate: boolean;
  private stateValue: LocalSandboxState = 'live';
  private rootExitCode: number | undefined;
  /** The init announced it is ending the sandbox, with the code it will exit with (see poll). */
  private endingCode: number | undefined;
  /** Reject functions of commands the init is running now, by request id. */
  private readonly inflight = new Map<number, (error: Error) => void>();
  /** Process groups of running commands; swept by the host if the root dies in process-group mode. */
  private readonly commandGroups = new Set<number>();
  private readonly queue: ExecQueue;
  private terminating: Promise<void> | undefined;
  /** Earlier cards' trees, moved aside into the sandbox's own directory and removed there. */
  private readonly trash: HostTrash;
  /**
   * The last command ended with no process left in the sandbox (its init said so), and none has
   * started since: no process can hold an earlier card's directories, so a reset may reuse them.
   */
  private quiet = false;

  constructor(private readonly params: LocalSandboxParams) {
    this.trash = new HostTrash(join(params.dir, 'trash'), params.onCleanupError);
    this.id = params.record.id;
    this.pid = params.record.rootPid;
    this.workdir = params.record.workdir;
    this.passedCanaryAtCreate = params.passedCanaryAtCreate;
    this.queue = new ExecQueue((argv, options) => this.execNow(argv, options), { now: params.now });
    params.channel.onEnding((code) => {
      this.endingCode = code;
    });
    void params.rootExited.then((code) => this.onRootExit(code));
  }

  get state(): LocalSandboxState {
    return this.stateValue;
  }

  exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.queue.exec(argv, options);
  }

  async poll(): Promise<PollResult> {
    switch (this.stateValue) {
      case 'terminated':
        return { state: 'missing' };
      case 'exited':
        return { state: 'exited', exitCode: this.rootExitCode ?? -1 };
      case 'detached':
        return this.rootAlive() ? { state: 'live' } : { state: 'missing' };
      case 'live': {
        // An init that announced its end is about to exit (a command it killed may already have
        // reported 137): not live, however /proc reads for the few ms its sweep takes.
        if (this.endingCode === undefined && this.rootAlive()) return { state: 'live' };
        // Dead (or a zombie) in /proc but Node has not delivered the exit yet: it is imminent.
        const code = await withDeadline(this.params.rootExited, ROOT_EXIT_SETTLE_MS).catch(() => undefined);
        if (code !== undefined) return { state: 'exited', exitCode: code };
        // The init's own word is an explicit finding even if its exit is slow to arrive.
        return this.endingCode === undefined ? { state: 'missing' } : { state: 'exited', exitCode: this.endingCode };
      }
    }
  }

  /** The directory is made only when the write says it is missing (a card file's is there: one hop fewer). */
  async writeFile(path: string, data: string | Uint8Array): Promise<void> {
    this.assertUsable();
    // The agent's uid gets what lanes writes for it (a card file, a staging archive it unpacks and removes).
    await writeHostFile(this.resolvePath(path), data, this.params.agentUid);
  }

  /** Only below the workdir: lanes reads back nothing else from an agent. */
  async readFile(path: string, options: ReadFileOptions = {}): Promise<Uint8Array | undefined> {
    this.assertUsable();
    const target = this.resolvePath(path);
    const relative = target.startsWith(`${this.workdir}/`) ? target.slice(this.workdir.length + 1).split('/') : undefined;
    if (!relative) throw new AgentFileError(basename(target), 'outside-workdir', `is outside the sandbox workdir ${this.workdir}`);
    const buffer = readBeneath(this.workdir, relative, options.maxBytes ?? agentLimits.DEFAULT_MAX_RESULT_BYTES);
    return buffer && new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  }

  /**
   * In this process, with no command started: the sandbox's files are this host's files. Not queued
   * behind a running command, like writeFile; the runner resets only between commands.
   * A directory that `mkdir -p` had to create is new, so empty: only one that was there already is
   * moved aside (HostTrash) and made again, and so is each removal. Synchronous where bounded
   * (host-files.ts): a fresh card's reset is a few system calls, not a few thread-pool round trips.
   * Targets inside one another keep the plain order: remove all, then make all.
   */
  async resetDirs(paths: readonly string[], options: Pick<ResetDirsOptions, 'remove'> = {}): Promise<ExecResult> {
    this.assertUsable();
    const targets = [...new Set(resetTargets(this.provider, this.workdir, paths))];
    let removals = resetTargets(this.provider, this.workdir, options.remove ?? []).filter((r) => !targets.includes(r));
    const startedAtMs = this.params.now();
    try {
      // An earlier card's tree becomes this one's when nothing can be holding it (tree-reuse.ts).
      let clean = new Set<string>();
      if (this.quiet && removals.length === 1 && targets.length > 0 && !nested(targets)) {
        const reused = await reuseTree(removals[0]!, targets, this.trash);
        if (reused) [clean, removals] = [reused, []];
      }
      // Removals first (one may hold a target, made again below), best effort: an earlier card's
      // leftover must not fail this card.
      for (const r of removals) await this.trash.discard(r).catch((error: unknown) => this.params.onCleanupError?.('remove earlier card', error));
      if (nested(targets)) {
        for (const target of targets) await this.trash.discard(target);
        for (const target of targets) mkdirSync(target, { recursive: true });
      } else {
        for (const target of targets) {
          if (clean.has(target) || madeNew(target)) continue;
          await this.trash.discard(target);
          mkdirSync(target, { recursive: true });
        }
      }
      if (this.params.agentUid !== undefined) shapeCardDirs(this.workdir, targets, this.params.agentUid);
    } catch (error) {
      return resetResult(startedAtMs, this.params.now(), error);
    }
    // The root may have died meanwhile; a dead sandbox must not pass for a clean one.
    this.assertUsable();
    return resetResult(startedAtMs, this.params.now());
  }

  terminate(): Promise<void> {
    this.terminating ??= this.doTerminate();
    return this.terminating;
  }

  /** Provider closed: stop talking to the sandbox but leave it running (it can be reaped by id). */
  detach(): void {
    if (this.stateValue !== 'live') return;
    this.stateValue = 'detached';
    this.failAll(new IllegalStateError(`sandbox ${this.id}: provider closed`));
    this.params.channel.close();
    this.params.detachRoot();
  }

  private async doTerminate(): Promise<void> {
    const wasDetached = this.stateValue === 'detached';
    this.stateValue = 'terminated';
    this.failAll(new SandboxGoneError(this.id, 'terminated'));
    const survivors = await reapSandbox(this.params.record, this.commandGroups);
    if (!wasDetached) {
      // Our own child: wait for Node to reap it so no zombie of ours outlives terminate().
      await bestEffort('await root exit', () => withDeadline(this.params.rootExited, ROOT_EXIT_SETTLE_MS), this.params.onCleanupError);
    }
    this.params.channel.close();
    await this.trash.settled();
    await bestEffort('remove sandbox dir', () => rm(this.params.dir, { recursive: true, force: true }), this.params.onCleanupError);
    this.params.onTerminated(this.id);
    if (survivors.length > 0) this.params.onCleanupError?.('terminate', new Error(`processes survived SIGKILL: ${survivors.join(' ')}`));
  }

  private onRootExit(code: number): void {
    this.rootExitCode = code;
    if (this.stateValue !== 'live') return;
    this.stateValue = 'exited';
    const tail = this.params.stderrTail().trim();
    this.failAll(new SandboxGoneError(this.id, `root exited with ${code}${tail ? `; init stderr: ${tail}` : ''}`, { observedExitCode: code }));
    // In a namespace the kernel has already killed everything; in a process group the commands
    // live on in their own groups, so sweep them. Done in both modes: it is the guarantee that a
    // dead sandbox leaves nothing running.
    void bestEffort('sweep dead sandbox', () => reapSandbox(this.params.record, this.commandGroups), this.params.onCleanupError);
  }

  private failAll(error: Error): void {
    for (const fail of [...this.inflight.values()]) fail(error);
    this.queue.rejectQueued(error);
  }

  private assertUsable(): void {
    switch (this.stateValue) {
      case 'live':
        return;
      case 'exited':
        throw new SandboxGoneError(this.id, `root exited with ${this.rootExitCode ?? 'unknown'}`, this.rootExitCode === undefined ? {} : { observedExitCode: this.rootExitCode });
      case 'terminated':
        throw new SandboxGoneError(this.id, 'terminated');
      case 'detached':
        throw new IllegalStateError(`sandbox ${this.id}: provider closed`);
    }
  }

  private rootAlive(): boolean {
    return isAlive(this.params.record.rootPid, this.params.record.rootStartTime);
  }

  private resolvePath(path: string): string {
    return resolve(this.workdir, path);
  }

  /** Runs one command now; only the queue calls this, so there is never more than one. */
  private execNow(argv: readonly string[], options: ExecOptions): Promise<ExecResult> {
    this.assertUsable();
    validateExec(argv, options);
    const { signal } = options;
    if (signal?.aborted) return Promise.resolve(cancelledBeforeStart(0));
    const { channel, now } = this.params;
    const startedAtMs = now();
    this.quiet = false;
    return new Promise<ExecResult>((resolvePromise, rejectPromise) => {
      const stdout = new CappedText(this.params.maxOutputChars);
      const stderr = new CappedText(this.params.maxOutputChars);
      const graceMs = options.killGraceMs ?? this.params.killGraceMs;
      let pgid: number | undefined;
      // Deadline/cancel → the init's escalation (it enforces timeoutMs itself; a cancel is sent to
      // it) → backstop: a healthy init always reports the end before it fires → settle.
      const backstopMs = 2 * graceMs + KILL_SWEEP_LIMIT_MS + INIT_REPORT_SLACK_MS;
      const lifecycle = new CommandLifecycle(
        { timeoutMs: options.timeoutMs, signal, backstopMs },
        {
          kill: (trigger) => {
            if (trigger === 'cancel') channel.cancel(id);
          },
          backstop: () => fail(new ProviderUnavailableError('local', `sandbox ${this.id}: init did not report the end of a killed command within ${backstopMs} ms`)),
        },
      );
      const settle = (): void => {
        lifecycle.settle();
        channel.forget(id);
        this.inflight.delete(id);
        if (pgid !== undefined) this.commandGroups.delete(pgid);
      };
      const fail = (error: Error): void => {
        settle();
        rejectPromise(error);
      };
      const { cwd, env, timeoutMs, endLeftovers } = options;
      const id = channel.request({ op: 'exec', argv, cwd, env, timeoutMs, graceMs, endLeftovers }, (event) => {
        switch (event.t) {
          case 'started':
            pgid = event.pid;
            this.commandGroups.add(event.pid);
            return;
          case 'out': {
            const stream: OutputStream = event.s === 1 ? 'stdout' : 'stderr';
            (stream === 'stdout' ? stdout : stderr).append(event.d);
            deliverOutput(options, stream, event.d);
            return;
          }
          case 'exit':
            this.quiet = event.alone === true;
            settle();
            resolvePromise({
              exitCode: event.code,
              stdout: stdout.toString(),
              stderr: stderr.toString(),
              timedOut: event.timedOut,
              cancelled: event.cancelled,
              durationMs: now() - startedAtMs,
            });
            return;
          case 'pong':
            return;
        }
      });
      this.inflight.set(id, fail);
      lifecycle.start();
    });
  }
}

/** `mkdir -p`: true when it made the directory (so it is empty); false when something was there. */
function madeNew(target: string): boolean {
  try {
    return mkdirSync(target, { recursive: true }) !== undefined;
  } catch {
    return false;
  }
}

/** Some target lies inside another. */
function nested(targets: readonly string[]): boolean {
  return targets.some((a) => targets.some((b) => b.startsWith(`${a}/`)));
}

function validateExec(argv: readonly string[], options: ExecOptions): void {
  if (argv.length === 0) throw new ProviderInvalidError('local', 'argv must not be empty');
  for (const [name, value] of [
    ['timeoutMs', options.timeoutMs],
    ['killGraceMs', options.killGraceMs],
  ] as const) {
    if (value !== undefined && !(Number.isFinite(value) && value > 0 && value <= MAX_TIMER_MS)) {
      throw new ProviderInvalidError('local', `${name} must be a positive number of ms up to ${MAX_TIMER_MS}, got ${value}`);
    }
  }
}

/** A throwing log sink must not lose the command's result, so its errors stop here. */
function deliverOutput(options: ExecOptions, stream: OutputStream, chunk: string): void {
  try {
    options.onOutput?.(stream, chunk);
  } catch {
    // intentionally ignored: see above
  }
}
