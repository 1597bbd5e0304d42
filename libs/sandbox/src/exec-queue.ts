import type { ExecOptions, ExecResult } from './provider.js';
import { cancelledBeforeStart } from './exec-result.js';

/** One provider's unserialized exec: runs argv now. The queue guarantees it is never called concurrently. */
export type RawExec = (argv: readonly string[], options: ExecOptions) => Promise<ExecResult>;

export interface ExecQueueDeps {
  /** Milliseconds clock for `durationMs` of commands cancelled while queued. Default `Date.now`. */
  now: () => number;
}

interface QueuedCommand {
  readonly argv: readonly string[];
  readonly options: ExecOptions;
  readonly enqueuedAtMs: number;
  resolve(result: ExecResult): void;
  reject(error: unknown): void;
  detachAbort?: () => void;
}

/**
 * Serializes one sandbox's commands (DESIGN.md failure 4: "commands in one sandbox are serialized").
 * Provider-neutral: it wraps any `RawExec`, so local and Modal sandboxes share one queueing rule.
 *
 * - FIFO, one command at a time; the next starts when the previous one settles (resolve or reject).
 * - A queued command whose `signal` fires before it starts is removed at once and resolves with
 *   `cancelled: true`, `exitCode: CANCELLED_EXIT_CODE` (130) and empty output; it never reaches the
 *   sandbox. A signal that is already aborted at `exec()` gives the same result immediately.
 * - Once a command has started, its `signal` belongs to the raw exec (cancel by killing its group).
 * - `timeoutMs` counts from the start of the command, not from enqueueing.
 */
export class ExecQueue {
  private readonly pending: QueuedCommand[] = [];
  private running = false;
  private readonly deps: ExecQueueDeps;

  constructor(
    private readonly raw: RawExec,
    deps: Partial<ExecQueueDeps> = {},
  ) {
    this.deps = { now: deps.now ?? Date.now };
  }

  /** Commands waiting behind the running one. */
  get queued(): number {
    return this.pending.length;
  }

  /** Whether a command is running now. */
  get busy(): boolean {
    return this.running;
  }

  exec(argv: readonly string[], options: ExecOptions = {}): Promise<ExecResult> {
    const { signal } = options;
    if (signal?.aborted) return Promise.resolve(cancelledBeforeStart(0));
    return new Promise<ExecResult>((resolve, reject) => {
      const entry: QueuedCommand = { argv, options, enqueuedAtMs: this.deps.now(), resolve, reject };
      if (signal) {
        const onAbort = (): void => {
          const index = this.pending.indexOf(entry);
          if (index === -1) return;
          this.pending.splice(index, 1);
          resolve(cancelledBeforeStart(this.deps.now() - entry.enqueuedAtMs));
        };
        signal.addEventListener('abort', onAbort, { once: true });
        entry.detachAbort = () => signal.removeEventListener('abort', onAbort);
      }
      this.pending.push(entry);
      this.pump();
    });
  }

  /**
   * Rejects every command still waiting (not the running one), e.g. once the sandbox is known dead,
   * so callers learn it now rather than one failed start at a time.
   */
  rejectQueued(error: unknown): void {
    for (const entry of this.pending.splice(0)) {
      entry.detachAbort?.();
      entry.reject(error);
    }
  }

  private pump(): void {
    if (this.running) return;
    const next = this.pending.shift();
    if (!next) return;
    next.detachAbort?.();
    this.running = true;
    let started: Promise<ExecResult>;
    try {
      started = this.raw(next.argv, next.options);
    } catch (error) {
      started = Promise.reject(error);
    }
    started.then(next.resolve, next.reject).finally(() => {
      this.running = false;
      this.pump();
    });
  }
}
