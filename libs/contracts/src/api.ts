import { z } from 'zod';
import { LaneNameSchema } from './card.js';
import { CardRecordSchema } from './card-record.js';
import { BlockedReasonSchema, CardStateSchema } from './card-state.js';
import { CARD_LIST_CURSOR_MAX_LENGTH, CARD_LIST_DEFAULT_LIMIT, CARD_LIST_MAX_LIMIT } from './defaults.js';
import { WorkerLivenessSchema } from './liveness.js';
import { SandboxInfoSchema } from './sandbox.js';

export const EnqueueResponseSchema = z.object({ id: z.string(), state: CardStateSchema });
export type EnqueueResponse = z.infer<typeof EnqueueResponseSchema>;

export const BulkEnqueueResponseSchema = z.object({
  cards: z.array(EnqueueResponseSchema.extend({ created: z.boolean() })),
});
export type BulkEnqueueResponse = z.infer<typeof BulkEnqueueResponseSchema>;

export const UnblockBodySchema = z.strictObject({ note: z.string().max(10_000).optional() }).default({});

/** `POST /v1/cards/:id/retry`: why, recorded in the card's history; the body may be left out. */
export const RetryBodySchema = z.strictObject({ reason: z.string().min(1).max(10_000).optional() }).default({});

/**
 * `GET /v1/cards`'s query, as the query string carries it (every value a string). `blockedReason`
 * lists blocked cards only: with a `state` other than blocked it is refused, naming `blockedReason`.
 * `updatedSince` is inclusive; `cursor` is the `nextCursor` of the page before, opaque.
 */
export const CardListQuerySchema = z
  .strictObject({
    lane: LaneNameSchema.optional(),
    state: CardStateSchema.optional(),
    blockedReason: BlockedReasonSchema.optional(),
    updatedSince: z.iso.datetime({ offset: true }).optional(),
    limit: z.coerce.number().int().min(1).max(CARD_LIST_MAX_LIMIT).default(CARD_LIST_DEFAULT_LIMIT),
    cursor: z.string().min(1).max(CARD_LIST_CURSOR_MAX_LENGTH).optional(),
  })
  .superRefine((q, ctx) => {
    if (q.blockedReason !== undefined && q.state !== undefined && q.state !== 'blocked') {
      ctx.addIssue({ code: 'custom', path: ['blockedReason'], message: `applies to blocked cards only, not state "${q.state}"` });
    }
  });
export type CardListQueryInput = z.input<typeof CardListQuerySchema>;
export type CardListQuery = z.infer<typeof CardListQuerySchema>;

/**
 * A card as a listing shows it: the record without what may be large (`prompt`, `metadata`) and
 * without its history. `GET /v1/cards/:id` has all of it.
 */
export const CardSummarySchema = CardRecordSchema.omit({ prompt: true, metadata: true, history: true, historyDropped: true });
export type CardSummary = z.infer<typeof CardSummarySchema>;

/**
 * A page of `GET /v1/cards`, newest update first. `nextCursor` is absent on the last page.
 * `snapshotAt`: the listing (every page of it) holds cards updated before this instant, fixed by its
 * first page; `updatedSince=<snapshotAt>` then lists what changed since, with no overlap.
 */
export const CardPageSchema = z.object({
  cards: z.array(CardSummarySchema),
  nextCursor: z.string().optional(),
  snapshotAt: z.string(),
});
export type CardPage = z.infer<typeof CardPageSchema>;

/** Every API error has this shape; `code` is stable, `message` is for people. */
export const ErrorBodySchema = z.object({
  error: z.object({
    code: z.string(),
    message: z.string(),
    issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBodySchema>;

export const BreakerStateSchema = z.enum(['closed', 'open', 'half-open']);
export type BreakerStateName = z.infer<typeof BreakerStateSchema>;

export const SlotStatusSchema = z.object({
  slot: z.string(),
  worker: z.string(),
  cardId: z.string().optional(),
  sandbox: SandboxInfoSchema.optional(),
  heartbeatAt: z.string().optional(),
  /** The supervisor's published verdict on the slot's worker (API output only; `unknown` when none). */
  workerLiveness: WorkerLivenessSchema.optional(),
});
export type SlotStatus = z.infer<typeof SlotStatusSchema>;

/** How a lane's agents are fenced (README "Threat model"): only `separate-uid` and `modal` keep an agent from the stack. */
export const LaneIsolationSchema = z.object({
  mode: z.enum(['separate-uid', 'pid-namespace', 'process-group', 'modal']),
  /** True unless agents are kept from the worker, the other slots and lanes' own files. */
  trustedAgentsOnly: z.boolean(),
  /** Why the lane runs weaker than it could (what the machine or the lane's files lack). */
  why: z.string().optional(),
});
export type LaneIsolation = z.infer<typeof LaneIsolationSchema>;

/** What a lane holds open (queued, running or blocked) against its bounds: past either, posts get 429 LANE_FULL. */
export const LaneOpenCardsSchema = z.object({
  cards: z.number().int(),
  maxCards: z.number().int(),
  /** Their card JSON, in bytes. */
  bytes: z.number().int(),
  maxBytes: z.number().int(),
});
export type LaneOpenCards = z.infer<typeof LaneOpenCardsSchema>;

export const LaneStatusSchema = z.object({
  name: z.string(),
  provider: z.string(),
  counts: z.record(z.string(), z.number()),
  slots: z.array(SlotStatusSchema),
  breaker: z.object({
    state: BreakerStateSchema,
    failures: z.number().int(),
    retryAt: z.string().optional(),
  }),
  desiredSlots: z.number().int(),
  outage: z.boolean(),
  /** As its workers reported it at boot; absent until one has. */
  isolation: LaneIsolationSchema.optional(),
  open: LaneOpenCardsSchema.optional(),
});
export type LaneStatus = z.infer<typeof LaneStatusSchema>;
