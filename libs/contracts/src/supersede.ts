import { z } from 'zod';
import { MS_PER_DAY } from './defaults.js';

/**
 * One run per PR (README "One run per PR"): a card may carry a `supersedeKey` (e.g.
 * `owner/repo#42`), and the newest card of a key on a lane is the one that matters. When a card
 * arrives, the earlier card of its key ends `cancelled` with the reason `superseded by <id>` if it
 * has not started; with `supersede: "cancel-running"` (the card's, else the lane's) a running one
 * is cancelled too (its process group is killed, the sandbox stays). At most one card of a key
 * runs at any moment across the lane's workers: a card whose key's earlier card still runs waits
 * without a slot until that run ends.
 */
export const SupersedeModeSchema = z.enum(['queued', 'cancel-running']);
export type SupersedeMode = z.infer<typeof SupersedeModeSchema>;

export const DEFAULT_SUPERSEDE_MODE: SupersedeMode = 'queued';

/**
 * A queued card waiting for its supersede key's earlier card to end (its state stays `queued`),
 * as `waiting (key limit)` is for a concurrency key.
 */
export const SUPERSEDE_WAITING = 'waiting (earlier card of its supersedeKey running)';

/** The cancel reason of a card a newer card of its key replaced. */
export function supersededReason(byCardId: string): string {
  return `superseded by ${byCardId}`;
}

/**
 * How long a lane remembers the newest card of a supersede key after that card arrived. The memory
 * only lets an arrival cancel its predecessor at once: a run also checks, as it is admitted, that
 * no newer card of its key arrived, and a card whose key is forgotten runs. 30 days: beyond any
 * card's queue wait and any lane's usual retention, and bounded, so keys of closed PRs go.
 */
export const SUPERSEDE_LATEST_TTL_MS = 30 * MS_PER_DAY;
