import type { PollResult } from '@lanes/contracts';

/**
 * The liveness race of one Modal command. The real SDK cannot see a sandbox die under an exec: a
 * dead task's command router stops answering, and the SDK retries that silence (exec start: ten
 * times over ~10 s; exec wait: forever). So while a command starts and runs, the sandbox is polled
 * on the control plane, and a poll that finds it finished settles `gone`.
 */
export class LivenessWatch {
  /** Resolves with what the poll found (`exited(137)`, `missing`) once the sandbox is seen finished. */
  readonly gone: Promise<string>;
  #polling = true;
  #timer: NodeJS.Timeout | undefined;
  #wake = (): void => {};

  constructor(poll: () => Promise<PollResult>, intervalMs: number) {
    let found!: (detail: string) => void;
    this.gone = new Promise<string>((resolve) => (found = resolve));
    void (async () => {
      while (this.#polling) {
        await new Promise<void>((r) => {
          this.#wake = r;
          this.#timer = setTimeout(r, intervalMs);
        });
        if (!this.#polling) return;
        try {
          const result = await poll();
          if (result.state === 'exited') found(`exited(${result.exitCode}) while running a command`);
          if (result.state === 'missing') found('missing while running a command');
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
