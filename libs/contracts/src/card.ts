import { z } from 'zod';
import { CARD_ID_MAX_LENGTH, MAX_CARD_METADATA_BYTES } from './defaults.js';

/** BullMQ forbids ':' in custom job ids, and a card id is its job id. */
export const CARD_ID_PATTERN = new RegExp(`^[A-Za-z0-9._-]{1,${CARD_ID_MAX_LENGTH}}$`);
/** Lane names become BullMQ queue names, which forbid ':'. */
export const LANE_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export const CardIdSchema = z.string().regex(CARD_ID_PATTERN, `must be 1-${CARD_ID_MAX_LENGTH} characters of [A-Za-z0-9._-]`);

export const LaneNameSchema = z.string().regex(LANE_NAME_PATTERN, 'must be 1-64 characters of [A-Za-z0-9._-]');

export const PullRequestSchema = z.strictObject({
  number: z.number().int().positive(),
  branch: z.string().min(1).max(255),
  base: z.string().min(1).max(255).optional(),
});

/**
 * BullMQ's own limit (2²¹ − 1, `Job.validateOptions`): a job's priority fills the high bits of a
 * score whose low 32 bits keep the order within a priority.
 */
export const MAX_CARD_PRIORITY = 2_097_151;

const utf8 = new TextEncoder();
/** The size a value takes as JSON, in UTF-8 bytes. */
const jsonBytes = (value: unknown): number => utf8.encode(JSON.stringify(value)).length;

/** A PR card as a board sends it. Only `lane` and `title` are required. */
export const CardInputSchema = z.strictObject({
  id: CardIdSchema.optional(),
  lane: LaneNameSchema,
  title: z.string().min(1).max(500),
  repo: z.string().min(1).max(2048).optional(),
  pr: PullRequestSchema.optional(),
  prompt: z.string().max(1_000_000).optional(),
  priority: z.number().int().min(0).max(MAX_CARD_PRIORITY).default(0),
  callbackUrl: z.url().optional(),
  metadata: z
    .record(z.string(), z.json())
    .refine((m) => jsonBytes(m) <= MAX_CARD_METADATA_BYTES, { message: `must be at most ${MAX_CARD_METADATA_BYTES} bytes as JSON` })
    .optional(),
});
export type CardInput = z.input<typeof CardInputSchema>;

/** A card once accepted: the id is always present. */
export const CardSchema = CardInputSchema.extend({ id: CardIdSchema });
export type Card = z.infer<typeof CardSchema>;
