import {
  ConnectTimeoutError,
  FaultPlanSchema,
  ProviderUnavailableError,
  defaults,
  type FaultPlan,
  type FaultPlanInput,
  type PollResult,
  type SandboxSpec,
  type SandboxTags,
} from '@lanes/contracts';
import type { CreateOptions, ExecOptions, ExecResult, ReadFileOptions, ResetDirsOptions, SandboxHandle, SandboxProvider, SandboxRef } from './provider.js';

/** The exit code a sandbox killed by the faulty provider reports (SIGKILL, as Modal reports terminate). */
export const FAULTY_KILLED_EXIT_CODE = 137;
/** The env var that names a command's card (DESIGN: set for every card run); `targetCards` matches it. */
export const CARD_ID_ENV = 'LANES_CARD_ID';
/** Long enough to outlast any test; the caller's timeout or cancel is what ends a hung command. */
const HANG_SECONDS = '86400';

/** What the faulty provider did, for tests to assert on. */
export interface FaultStats {
  createsAttempted: number;
  createFailuresInjected: number;
  connectTimeoutsInjected: number;
  commandsStarted: number;
  sandboxesKilled: number;
  bareExit1Injected: number;
  hangsInjected: number;
  pollErrorsInjected: number;
}

function bareExit1(durationMs: number): ExecResult {
  return { exitCode: 1, stdout: '', stderr: '', timedOut: false, cancelled: false, durationMs };
}

/** Resolves after `ms`, or rejects with the signal's reason if it aborts first. */
function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * One wrapped sandbox. Faults that "kill" it really terminate the underlying sandbox, so the
 * provider's own dead-sandbox behaviour is what callers see; only the exit code poll() reports is
 * pinned (137, or 0 for `exited-0`), because providers differ in what a terminate reads as.
 */
class FaultySandboxHandle implements SandboxHandle {
  #commands = 0;
  /** Set once a fault killed the sandbox: what poll() reports from then on. */
  #forcedExitCode: number | undefined;

  constructor(
    private readonly inner: SandboxHandle,
    private readonly owner: FaultyProvider,
  ) {}

  get id(): string {
    return this.inner.id;
  }
  get provider(): string {
    return this.inner.provider;
  }
  get pid(): number | undefined {
    return this.inner.pid;
  }
  get workdir(): string {
    return this.inner.workdir;
  }

  exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    return this.#faulted(options.env?.[CARD_ID_ENV], options, () => this.inner.exec(argv, options));
  }

  /**
   * Faulted as the card-less command it replaces (the runner's `rm -rf && mkdir -p` exec): it counts
   * toward `dieAfterCommands` and `bareExit1Every`, and hangs under `hang`, so a plan means the same
   * number of commands whether the provider resets in process or not.
   */
  resetDirs(paths: readonly string[], options: ResetDirsOptions = {}): Promise<ExecResult> {
    return this.#faulted(undefined, options, () => this.inner.resetDirs(paths, options));
  }

  async #faulted(cardId: string | undefined, options: ResetDirsOptions, run: () => Promise<ExecResult>): Promise<ExecResult> {
    const plan = this.owner.plan;
    this.owner.count('commandsStarted');
    // Commands of other cards (and card-less ones: canaries, probes) pass through uncounted.
    if (plan.targetCards !== undefined && (cardId === undefined || !plan.targetCards.includes(cardId))) return run();
    const n = ++this.#commands;
    const startedAt = Date.now();
    if (plan.dieAfterCommands !== undefined && n >= plan.dieAfterCommands && this.#forcedExitCode === undefined) {
      // The sandbox dies as this command starts: the command meets the provider's real dead path.
      await this.#kill(FAULTY_KILLED_EXIT_CODE);
      return run();
    }
    if (plan.bareExit1Every !== undefined && n % plan.bareExit1Every === 0) {
      this.owner.count('bareExit1Injected');
      if (plan.bareExit1Mode === 'dead') await this.#kill(FAULTY_KILLED_EXIT_CODE);
      if (plan.bareExit1Mode === 'exited-0') await this.#kill(0);
      return bareExit1(Date.now() - startedAt);
    }
    if (plan.hang) {
      // A real command that never ends by itself, so the provider's real kill path has to end it.
      this.owner.count('hangsInjected');
      return this.inner.exec(['sleep', HANG_SECONDS], options);
    }
    return run();
  }

  async poll(): Promise<PollResult> {
    if (this.owner.plan.pollErrors) {
      this.owner.count('pollErrorsInjected');
      throw new ProviderUnavailableError(this.inner.provider, 'injected poll error (faulty provider)');
    }
    const found = await this.inner.poll();
    if (this.#forcedExitCode !== undefined && found.state !== 'live') return { state: 'exited', exitCode: this.#forcedExitCode };
    return found;
  }

  writeFile(path: string, data: string | Uint8Array): Promise<void> {
    return this.inner.writeFile(path, data);
  }

  readFile(path: string, options?: ReadFileOptions): Promise<Uint8Array | undefined> {
    return this.inner.readFile(path, options);
  }

  terminate(): Promise<void> {
    return this.inner.terminate();
  }

  async #kill(exitCode: number): Promise<void> {
    this.#forcedExitCode = exitCode;
    this.owner.count('sandboxesKilled');
    await this.inner.terminate();
  }
}

/**
 * Wraps any provider and injects the faults of a `FaultPlan` (deaths, bare exit 1, hangs, create
 * failures, connect timeouts, poll errors), for tests and demos. The plan can be swapped or patched
 * at runtime (`setPlan`, `updatePlan`); "next N creates" counters count down as they fire, so
 * `plan.createFailures` reads how many are left. With an empty plan it is transparent.
 */
export class FaultyProvider implements SandboxProvider {
  readonly faulty = true;
  #plan: FaultPlan;
  readonly #stats: FaultStats = {
    createsAttempted: 0,
    createFailuresInjected: 0,
    connectTimeoutsInjected: 0,
    commandsStarted: 0,
    sandboxesKilled: 0,
    bareExit1Injected: 0,
    hangsInjected: 0,
    pollErrorsInjected: 0,
  };

  constructor(
    readonly inner: SandboxProvider,
    plan: FaultPlanInput = {},
  ) {
    this.#plan = FaultPlanSchema.parse(plan);
  }

  /** The provider's name is the inner one's: breakers and metrics see the provider being faulted. */
  get name(): string {
    return this.inner.name;
  }

  /** The current plan (a copy); counters show what is left. */
  get plan(): FaultPlan {
    return { ...this.#plan };
  }

  /** Replaces the plan (validated; omitted fields take their defaults, i.e. off). */
  setPlan(plan: FaultPlanInput): void {
    this.#plan = FaultPlanSchema.parse(plan);
  }

  /** Changes some fields and keeps the rest, e.g. `updatePlan({ createFailures: 5 })`. */
  updatePlan(patch: Partial<FaultPlanInput>): void {
    this.#plan = FaultPlanSchema.parse({ ...this.#plan, ...patch });
  }

  get stats(): Readonly<FaultStats> {
    return { ...this.#stats };
  }

  /** @internal used by handles to record what they injected. */
  count(key: keyof FaultStats): void {
    this.#stats[key] += 1;
  }

  async create(spec: SandboxSpec, options: CreateOptions = {}): Promise<SandboxHandle> {
    this.#stats.createsAttempted += 1;
    if (this.#plan.createFailures > 0) {
      this.#plan = { ...this.#plan, createFailures: this.#plan.createFailures - 1 };
      this.#stats.createFailuresInjected += 1;
      throw new ProviderUnavailableError(this.inner.name, 'injected create failure (faulty provider)');
    }
    if (this.#plan.connectTimeouts > 0) {
      // Nothing is created at all, so nothing can be left behind; the caller waits out its deadline.
      this.#plan = { ...this.#plan, connectTimeouts: this.#plan.connectTimeouts - 1 };
      this.#stats.connectTimeoutsInjected += 1;
      const timeoutMs = options.connectTimeoutMs ?? defaults.DEFAULT_CONNECT_TIMEOUT_MS;
      await sleep(timeoutMs, options.signal);
      throw new ConnectTimeoutError(this.inner.name, timeoutMs);
    }
    return new FaultySandboxHandle(await this.inner.create(spec, options), this);
  }

  list(tags?: Partial<SandboxTags>): Promise<SandboxRef[]> {
    return this.inner.list(tags);
  }

  terminateById(id: string): Promise<void> {
    return this.inner.terminateById(id);
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}

/** Wraps `inner` in a FaultyProvider with `plan` (default: no faults). */
export function createFaultyProvider(inner: SandboxProvider, plan: FaultPlanInput = {}): FaultyProvider {
  return new FaultyProvider(inner, plan);
}
