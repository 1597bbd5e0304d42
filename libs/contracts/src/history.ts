import { z } from 'zod';
import { BlockedReasonSchema, CardStateSchema, FailedReasonSchema } from './card-state.js';
import { ObservedExitCodeSchema, VerdictSchema } from './sandbox.js';

/** One transition of a card, appended and never rewritten. */
export const HistoryEntrySchema = z.object({
  at: z.string(),
  state: CardStateSchema,
  attempt: z.number().int().nonnegative(),
  sandboxId: z.string().optional(),
  blockedReason: BlockedReasonSchema.optional(),
  failedReason: FailedReasonSchema.optional(),
  verdict: VerdictSchema.optional(),
  observedExitCode: ObservedExitCodeSchema.optional(),
  exitCode: z.number().int().optional(),
  message: z.string().optional(),
  retryAt: z.string().optional(),
});
export type HistoryEntry = z.infer<typeof HistoryEntrySchema>;
