/** Receives failures of cleanup steps that must not mask the error or result being returned. */
export type CleanupErrorSink = (label: string, error: unknown) => void;

/**
 * Runs a cleanup step whose failure must not change the outcome (e.g. removing a workspace after a
 * sandbox is already dead). The failure goes to `onError` so it is still visible.
 */
export async function bestEffort(label: string, step: () => unknown, onError?: CleanupErrorSink): Promise<void> {
  try {
    await step();
  } catch (error) {
    onError?.(label, error);
  }
}
