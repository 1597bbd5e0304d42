import { z } from 'zod';
import {
  BlockedReasonSchema,
  CardSchema,
  CardStateSchema,
  FailedReasonSchema,
  HistoryEntrySchema,
  ObservedExitCodeSchema,
  StateDetailSchema,
  type CardRecord,
} from '@lanes/contracts';

const Count = z.coerce.number().int().nonnegative();

/** The card hash as stored; decoded, never cast. */
export const CardHashSchema = z.object({
  card: z.string(),
  lane: z.string(),
  state: CardStateSchema,
  attempts: Count,
  infraRetries: Count.default(0),
  createdAt: z.string(),
  updatedAt: z.string(),
  runToken: z.string().optional(),
  /** Set while the card is parked over its key's limit (key-limit-script.ts). */
  stateDetail: StateDetailSchema.optional(),
  blockedReason: BlockedReasonSchema.optional(),
  blockedMessage: z.string().optional(),
  failedReason: FailedReasonSchema.optional(),
  sandboxId: z.string().optional(),
  observedExitCode: z.string().optional(),
  result: z.string().optional(),
  historyDropped: Count.optional(),
});
export type CardHash = z.infer<typeof CardHashSchema>;

/** The record the API returns, from the hash and the history entries as stored. */
export function recordOf(hash: CardHash, history: readonly string[]): CardRecord {
  const card = CardSchema.parse(JSON.parse(hash.card));
  const record: CardRecord = {
    ...card,
    state: hash.state,
    attempts: hash.attempts,
    infraRetries: hash.infraRetries,
    createdAt: hash.createdAt,
    updatedAt: hash.updatedAt,
    history: history.map((h) => HistoryEntrySchema.parse(JSON.parse(h))),
  };
  if (hash.stateDetail && record.state === 'queued') record.stateDetail = hash.stateDetail;
  if (hash.blockedReason) record.blockedReason = hash.blockedReason;
  if (hash.blockedMessage) record.blockedMessage = hash.blockedMessage;
  if (hash.failedReason && record.state === 'failed') record.failedReason = hash.failedReason;
  if (hash.sandboxId) record.sandboxId = hash.sandboxId;
  if (hash.observedExitCode) record.observedExitCode = ObservedExitCodeSchema.parse(JSON.parse(hash.observedExitCode));
  if (hash.result) record.result = z.json().parse(JSON.parse(hash.result));
  if (hash.historyDropped) record.historyDropped = hash.historyDropped;
  return record;
}
