/** Thrown by `withDeadline` when the deadline passes first; callers translate it to their typed error. */
export class DeadlineExceeded extends Error {
  constructor(readonly timeoutMs: number) {
    super(`deadline of ${timeoutMs} ms exceeded`);
    this.name = 'DeadlineExceeded';
  }
}

/**
 * Settles with `work`, or rejects with `DeadlineExceeded` after `timeoutMs`, or with the signal's
 * reason when `signal` aborts first. `work` itself is not cancelled: the caller cleans up.
 */
export function withDeadline<T>(work: Promise<T>, timeoutMs: number, signal?: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => finish(() => reject(signal?.reason));
    const timer = setTimeout(() => finish(() => reject(new DeadlineExceeded(timeoutMs))), timeoutMs);
    signal?.addEventListener('abort', onAbort, { once: true });
    let settled = false;
    function finish(settle: () => void): void {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      settle();
    }
    work.then(
      (value) => finish(() => resolve(value)),
      (error: unknown) => finish(() => reject(error)),
    );
  });
}

/** Polls `check` every `intervalMs` until it returns true or `timeoutMs` passes; returns the last answer. */
export async function pollUntil(check: () => boolean, timeoutMs: number, intervalMs: number): Promise<boolean> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    if (check()) return true;
    if (Date.now() >= until) return false;
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}
