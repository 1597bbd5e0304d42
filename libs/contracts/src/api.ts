import { z } from 'zod';
import { CardStateSchema } from './card-state.js';
import { WorkerLivenessSchema } from './liveness.js';
import { SandboxInfoSchema } from './sandbox.js';

export const EnqueueResponseSchema = z.object({ id: z.string(), state: CardStateSchema });
export type EnqueueResponse = z.infer<typeof EnqueueResponseSchema>;

export const BulkEnqueueResponseSchema = z.object({
  cards: z.array(EnqueueResponseSchema.extend({ created: z.boolean() })),
});
export type BulkEnqueueResponse = z.infer<typeof BulkEnqueueResponseSchema>;

export const UnblockBodySchema = z.strictObject({ note: z.string().max(10_000).optional() }).default({});

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
});
export type LaneStatus = z.infer<typeof LaneStatusSchema>;
