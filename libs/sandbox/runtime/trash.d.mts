/** Types for trash.mjs, which stays plain JS so the sandbox init runs on bare `node`. */
export const TRASH_SWEEP_INTERVAL_MS: number;
export const SYNC_REMOVE_MAX_ENTRIES: number;
export function emptyTrash(dir: string): Promise<unknown[]>;
