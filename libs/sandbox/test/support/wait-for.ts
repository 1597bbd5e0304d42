/** Defaults for waiting on a condition in tests: generous deadline, tight poll. */
export const WAIT_TIMEOUT_MS = 5_000;
export const WAIT_INTERVAL_MS = 10;

/**
 * Polls `probe` until it returns a truthy value and returns it; fails with `what` at the deadline.
 * Tests wait on conditions this way, never on bare sleeps.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  { timeoutMs = WAIT_TIMEOUT_MS, intervalMs = WAIT_INTERVAL_MS }: { timeoutMs?: number; intervalMs?: number } = {},
): Promise<NonNullable<T>> {
  const until = Date.now() + timeoutMs;
  let last: T | undefined;
  for (;;) {
    last = await probe();
    if (last) return last as NonNullable<T>;
    if (Date.now() >= until) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (last: ${JSON.stringify(last)})`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

/** Resolves once `text` has appeared in a command's live output; pass `onOutput` to the exec. */
export function outputWatcher(text: string): { onOutput: (stream: string, chunk: string) => void; seen: Promise<void> } {
  let buffer = '';
  let resolveSeen: () => void = () => {};
  const seen = new Promise<void>((resolve) => {
    resolveSeen = resolve;
  });
  return {
    onOutput: (_stream, chunk) => {
      buffer += chunk;
      if (buffer.includes(text)) resolveSeen();
    },
    seen,
  };
}
