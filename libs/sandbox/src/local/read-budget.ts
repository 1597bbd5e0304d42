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
