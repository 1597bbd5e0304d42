/**
 * The host side of how one running command ends, written once for every provider:
 *
 *   deadline (timeoutMs from the start) or cancel (signal) → the provider's kill, which runs the
 *   SIGINT → grace → SIGTERM → grace → SIGKILL escalation its own way (local: the init does it;
 *   Modal: a kill exec of the process-group script) → backstop: once the kill is under way, a
 *   command that still has not ended within `backstopMs` is the provider's failure (the
 *   provider's hook settles the exec with an error instead of hanging) → settle: timers and the
 *   abort listener go, whatever ended the command.
 *
 * Providers keep only what differs: how to kill (`kill`), how long a healthy kill takes to be
 * reported (`backstopMs`), and what a missed backstop means (`backstop`). Which of deadline and
 * cancel came first is recorded here (`timedOut`/`cancelled`): the first one wins.
 */
export interface CommandLifecycleHooks {
  /**
   * Starts killing the command, once per trigger (a cancel after the deadline is passed on too;
   * the provider's kill is idempotent). Resolves when the provider's own kill attempts are over;
   * the backstop counts from then.
   */
  kill(trigger: 'deadline' | 'cancel'): Promise<void> | void;
  /** The command did not end within `backstopMs` of its kill: settle it as the provider's failure. */
  backstop(): void;
}

/** The clock a lifecycle keeps its deadline and backstop on: the process's timers unless a test gives its own. */
export interface LifecycleTimers {
  setTimeout(fn: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

const PROCESS_TIMERS: LifecycleTimers = {
  setTimeout: (fn, ms) => setTimeout(fn, ms),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout | undefined),
};

export interface CommandLifecycleOptions {
  timeoutMs?: number | undefined;
  signal?: AbortSignal | undefined;
  /** After the kill (its returned promise) is over, how long the command may take to be reported ended. */
  backstopMs: number;
  timers?: LifecycleTimers;
}

export class CommandLifecycle {
  #timedOut = false;
  #cancelled = false;
  #deadline: unknown;
  #backstop: unknown;
  #killing: Promise<void> | undefined;
  #settled = false;
  readonly #onAbort = (): void => this.#trigger('cancel');
  readonly #timers: LifecycleTimers;

  constructor(
    private readonly options: CommandLifecycleOptions,
    private readonly hooks: CommandLifecycleHooks,
  ) {
    this.#timers = options.timers ?? PROCESS_TIMERS;
  }

  /** Arms the deadline and the cancel listener; call once the command has started. */
  start(): void {
    const { timeoutMs, signal } = this.options;
    if (timeoutMs !== undefined) this.#deadline = this.#timers.setTimeout(() => this.#trigger('deadline'), timeoutMs);
    if (signal?.aborted) this.#onAbort();
    else signal?.addEventListener('abort', this.#onAbort, { once: true });
  }

  /** The deadline came first (a cancel after it does not change that). */
  get timedOut(): boolean {
    return this.#timedOut;
  }

  /** The cancel came first. */
  get cancelled(): boolean {
    return this.#cancelled;
  }

  /** The first kill while it runs (or ran): a provider may let it finish before the next command. */
  get killing(): Promise<void> | undefined {
    return this.#killing;
  }

  /** The command ended (or failed): no more triggers, no backstop. */
  settle(): void {
    this.#settled = true;
    this.#timers.clearTimeout(this.#deadline);
    this.#timers.clearTimeout(this.#backstop);
    this.options.signal?.removeEventListener('abort', this.#onAbort);
  }

  #trigger(trigger: 'deadline' | 'cancel'): void {
    if (this.#settled) return;
    if (trigger === 'deadline' && !this.#cancelled) this.#timedOut = true;
    if (trigger === 'cancel' && !this.#timedOut) this.#cancelled = true;
    const kill = Promise.resolve(this.hooks.kill(trigger)).catch(() => undefined);
    if (this.#killing) return;
    this.#killing = kill.then(() => {
      if (this.#settled) return;
      this.#backstop = this.#timers.setTimeout(() => {
        if (!this.#settled) this.hooks.backstop();
      }, this.options.backstopMs);
    });
  }
}
