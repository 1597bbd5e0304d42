import { SandboxGoneError, type PollResult } from '@lanes/contracts';

/** What a poll says of a sandbox that has finished. */
export type FinishedPoll = Exclude<PollResult, { state: 'live' }>;

/** The SandboxGoneError for a poll's finding, keeping the exit code it saw (failure 3: keep what was seen). */
export function goneFromPoll(sandboxId: string, found: FinishedPoll, when: string): SandboxGoneError {
  if (found.state === 'missing') return new SandboxGoneError(sandboxId, `missing ${when}`);
  return new SandboxGoneError(sandboxId, `exited(${found.exitCode}) ${when}`, { observedExitCode: found.exitCode });
}

/**
 * The liveness race of one Modal command. The real SDK cannot always see a sandbox die under an
 * exec: a dead task's router usually answers NOT_FOUND (which `readRouterError` has a poll confirm),
 * but when its worker is gone too it stops answering, and the SDK retries that silence (exec start:
 * ten times over ~10 s; exec wait: forever). So while a command starts and runs, the sandbox is
 * polled on the control plane, and a poll that finds it finished settles `gone`.
 */
export class LivenessWatch {
  /** Resolves with what the poll found (exited with its code, or missing) once the sandbox is seen finished. */
  readonly gone: Promise<FinishedPoll>;
  #polling = true;
  #timer: NodeJS.Timeout | undefined;
  #wake = (): void => {};

  constructor(poll: () => Promise<PollResult>, intervalMs: number) {
    let found!: (result: FinishedPoll) => void;
    this.gone = new Promise<FinishedPoll>((resolve) => (found = resolve));
    void (async () => {
      while (this.#polling) {
        await new Promise<void>((r) => {
          this.#wake = r;
          this.#timer = setTimeout(r, intervalMs);
        });
        if (!this.#polling) return;
        try {
          const result = await poll();
          if (result.state !== 'live') found(result);
        } catch {
          // Could not ask: not a finding. wait() and the backstop still bound the command.
        }
      }
    })();
  }

  /** Stops polling; a poll in flight may still answer, and nothing waits on it. */
  stop(): void {
    this.#polling = false;
    clearTimeout(this.#timer);
    this.#wake();
  }
}

/**
 * `call` raced against a LivenessWatch: it settles as the call does, or rejects with SandboxGoneError
 * once a poll finds the sandbox finished. For SDK calls that are an exec underneath without being a
 * lanes command (the filesystem API's helper), whose wait the SDK retries forever on a dead task.
 */
export async function raceLiveness<T>(call: Promise<T>, poll: () => Promise<PollResult>, intervalMs: number, sandboxId: string, when: string): Promise<T> {
  const watch = new LivenessWatch(poll, intervalMs);
  // The call may settle after the race is lost: nobody waits on it then.
  call.catch(() => undefined);
  try {
    return await Promise.race([
      call,
      watch.gone.then((found): never => {
        throw goneFromPoll(sandboxId, found, when);
      }),
    ]);
  } finally {
    watch.stop();
  }
}
