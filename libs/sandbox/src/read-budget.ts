/**
 * How fast the host reads a sandbox's channel: at most `bytesPerS`, counted over windows of
 * READ_WINDOW_MS. Past a window's share the channel is paused until the window ends; the sandbox's
 * init then stops reading the command's output (it holds back while its channel is full), and the
 * command waits on its own pipe. Pure: the channel carries out the decision.
 */

/** Short enough that a cancel or an exit behind a flood waits a tenth of a second at most. */
export const READ_WINDOW_MS = 100;

export interface ReadWindow {
  startedAtMs: number;
  bytes: number;
}

export type ReadDecision = { action: 'read'; window: ReadWindow } | { action: 'pause'; resumeInMs: number; window: ReadWindow };

/** The window after `bytes` more arrived at `nowMs`, and whether reading goes on or pauses until the window ends. */
export function decideRead(window: ReadWindow | undefined, bytes: number, nowMs: number, bytesPerS: number): ReadDecision {
  const current =
    window === undefined || nowMs - window.startedAtMs >= READ_WINDOW_MS ? { startedAtMs: nowMs, bytes } : { startedAtMs: window.startedAtMs, bytes: window.bytes + bytes };
  const share = (bytesPerS * READ_WINDOW_MS) / 1000;
  if (current.bytes < share) return { action: 'read', window: current };
  return { action: 'pause', resumeInMs: current.startedAtMs + READ_WINDOW_MS - nowMs, window: current };
}

/**
 * The same budget for a reader that pulls whole messages of any size (the Modal SDK's output
 * streams, where one message may be a MiB): each chunk read is paid for in time, `bytes / bytesPerS`,
 * from when the last one was paid (or from now less one window, so an idle reader may take a
 * window's share at once, as the windowed budget lets it). Answers when the next read may go.
 */
export function paceRead(readyAtMs: number | undefined, bytes: number, nowMs: number, bytesPerS: number): { readyAtMs: number; waitMs: number } {
  const from = Math.max(readyAtMs ?? Number.NEGATIVE_INFINITY, nowMs - READ_WINDOW_MS);
  const ready = from + (bytes * 1000) / bytesPerS;
  return { readyAtMs: ready, waitMs: Math.max(0, ready - nowMs) };
}

/**
 * paceRead for one command's readers: after each chunk, `took` resolves when the next read may go.
 * Shared by a command's stdout and stderr, so the two together keep to the rate. Not reading is what
 * slows the sender: the SDK's streams pull only when read (high water mark 0), so the rest waits
 * where it came from. `release` ends the pacing (the command exited: what is left is read at once,
 * bounded by the caller's drain deadline), waking any reader that waits.
 */
export class ReadPacer {
  #readyAtMs: number | undefined;
  #released = false;
  readonly #waiting = new Set<() => void>();

  constructor(
    private readonly bytesPerS: number,
    private readonly nowMs: () => number = () => performance.now(),
  ) {}

  async took(bytes: number): Promise<void> {
    if (this.#released) return;
    const { readyAtMs, waitMs } = paceRead(this.#readyAtMs, bytes, this.nowMs(), this.bytesPerS);
    this.#readyAtMs = readyAtMs;
    if (waitMs <= 0) return;
    await new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#waiting.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, waitMs);
      this.#waiting.add(wake);
    });
  }

  release(): void {
    this.#released = true;
    for (const wake of [...this.#waiting]) wake();
  }
}
