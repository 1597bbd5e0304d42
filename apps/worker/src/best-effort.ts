import type { Logger } from 'pino';
import type { CleanupErrorSink } from '@lanes/sandbox';

/** Sends best-effort failures to the log as warnings: visible, never thrown into recovery. */
export function warnTo(log: Logger): CleanupErrorSink {
  return (label, err) => log.warn({ err, op: label }, `${label} failed`);
}
