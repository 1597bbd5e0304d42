import { z } from 'zod';
import { CardSchema } from './card.js';
import { StateDetailSchema } from './concurrency-key.js';
import { BlockedReasonSchema, CardStateSchema, FailedReasonSchema } from './card-state.js';
import { HistoryEntrySchema } from './history.js';
import { ObservedExitCodeSchema } from './sandbox.js';

/** The card as the API returns it: the card itself plus everything known about its run. */
export const CardRecordSchema = CardSchema.extend({
  state: CardStateSchema,
  /** A queued card parked over its key's limit: `waiting (key limit)`. */
  stateDetail: StateDetailSchema.optional(),
  blockedReason: BlockedReasonSchema.optional(),
  blockedMessage: z.string().optional(),
  failedReason: FailedReasonSchema.optional(),
  attempts: z.number().int().nonnegative(),
  infraRetries: z.number().int().nonnegative(),
  sandboxId: z.string().optional(),
  observedExitCode: ObservedExitCodeSchema.optional(),
  result: z.json().optional(),
  createdAt: z.string(),
  updatedAt: z.string(),
  history: z.array(HistoryEntrySchema),
  /** History entries folded away by the cap (the first entry and the newest are kept); absent when none were. */
  historyDropped: z.number().int().positive().optional(),
  /** The last CARD_OUTPUT_TAIL_BYTES of the agent's output lines (stderr lines marked `[stderr] `); absent before any. */
  outputTail: z.string().optional(),
});
export type CardRecord = z.infer<typeof CardRecordSchema>;
