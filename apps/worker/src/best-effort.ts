import type { Logger } from 'pino';

/** Runs a cleanup whose failure must not stop the caller; the failure is logged, never thrown. */
export async function bestEffort(log: Logger, label: string, fn: () => Promise<unknown>): Promise<void> {
  try {
    await fn();
  } catch (err) {
    log.warn({ err, op: label }, `${label} failed`);
  }
}
