import { constants } from 'node:os';
import type { ExecResult } from './provider.js';

/**
 * Exit code of a command cancelled before it started (or while queued): 128+SIGINT, what a shell
 * reports for an interrupted command, so "cancelled" reads the same whether it had started or not.
 * Such results carry `cancelled: true` and empty output.
 */
export const CANCELLED_EXIT_CODE = 128 + constants.signals.SIGINT;

/** The shell convention for a signalled process: 128 + signal number (SIGKILL → 137). */
export function signalExitCode(signal: NodeJS.Signals): number {
  return 128 + (constants.signals[signal] ?? 0);
}

/** Exit code from a Node `exit`/`close` event pair; `code` wins when the process exited normally. */
export function exitCodeOf(code: number | null, signal: NodeJS.Signals | null): number {
  if (code !== null) return code;
  return signal ? signalExitCode(signal) : -1;
}

/** The result for a command that never ran because its signal fired first. */
export function cancelledBeforeStart(durationMs: number): ExecResult {
  return { exitCode: CANCELLED_EXIT_CODE, stdout: '', stderr: '', timedOut: false, cancelled: true, durationMs };
}
