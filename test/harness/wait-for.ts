/** Defaults for waiting on a condition: a deadline generous enough for a loaded CI box, a tight poll. */
export const WAIT_TIMEOUT_MS = 20_000;
export const WAIT_INTERVAL_MS = 20;

/**
 * Polls `probe` until it returns a truthy value and returns it, or fails after `timeoutMs` naming
 * what it waited for (and the last value or error). Tests wait on conditions this way, never on bare sleeps.
 * An error for which `abortOn` answers true ends the wait at once: the condition can no longer come true.
 */
export async function waitFor<T>(
  what: string,
  probe: () => T | Promise<T>,
  { timeoutMs = WAIT_TIMEOUT_MS, intervalMs = WAIT_INTERVAL_MS, abortOn }: { timeoutMs?: number; intervalMs?: number; abortOn?: (err: unknown) => boolean } = {},
): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await probe();
      if (value) return value as NonNullable<T>;
      last = value;
    } catch (err) {
      if (abortOn?.(err)) throw err;
      last = err;
    }
    if (Date.now() > deadline) {
      const seen = last instanceof Error ? `last error: ${last.message}` : `last: ${JSON.stringify(last)}`;
      throw new Error(`timed out after ${timeoutMs} ms waiting for ${what} (${seen})`);
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
