import { z } from 'zod';
import { ConcurrencyKeySchema } from './concurrency-key.js';
import { SupersedeModeSchema } from './supersede.js';
import { CARD_ID_MAX_LENGTH, MAX_CARD_METADATA_BYTES } from './defaults.js';

/**
 * BullMQ forbids ':' in custom job ids, and a card id is its job id. It also names the card's
 * directory in its sandbox, so it starts with a letter or digit: `.` and `..` would name the
 * directory's parent, and a leading `-` reads as an option to any tool handed the id.
 */
export const CARD_ID_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._-]{0,${CARD_ID_MAX_LENGTH - 1}}$`);
/** Lane names become BullMQ queue names, which forbid ':'. */
export const LANE_NAME_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

export const CardIdSchema = z.string().regex(CARD_ID_PATTERN, `must be 1-${CARD_ID_MAX_LENGTH} characters of [A-Za-z0-9._-], starting with a letter or digit`);

export const LaneNameSchema = z.string().regex(LANE_NAME_PATTERN, 'must be 1-64 characters of [A-Za-z0-9._-]');

/**
 * Why a branch name is refused, or undefined when git would take it (`git check-ref-format
 * --branch`'s rules). Agents hand branches to git on a command line, so a leading `-` is an option
 * injection (`--upload-pack=…`), and whitespace, control characters and `..` are never a ref.
 */
export function gitRefProblem(ref: string): string | undefined {
  if (ref.startsWith('-')) return 'must not start with "-"';
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what it refuses
  if (/[\x00-\x20\x7f]/.test(ref)) return 'must not contain whitespace or control characters';
  if (ref.includes('..')) return 'must not contain ".."';
  if (/[~^:?*[\\]/.test(ref)) return 'must not contain any of ~ ^ : ? * [ \\';
  if (ref.includes('@{') || ref === '@') return 'must not contain "@{" or be "@"';
  if (ref.includes('//') || ref.startsWith('/') || ref.endsWith('/')) return 'must not start or end with "/" or contain "//"';
  if (ref.endsWith('.') || ref.endsWith('.lock') || ref.split('/').some((part) => part.startsWith('.'))) {
    return 'must not end with "." or ".lock", or have a part starting with "."';
  }
  return undefined;
}

const GitRefSchema = z
  .string()
  .min(1)
  .max(255)
  .superRefine((ref, ctx) => {
    const problem = gitRefProblem(ref);
    if (problem) ctx.addIssue({ code: 'custom', message: `not a git branch name: ${problem}` });
  });

export const PullRequestSchema = z.strictObject({
  number: z.number().int().positive(),
  branch: GitRefSchema,
  base: GitRefSchema.optional(),
});

/**
 * BullMQ's own limit (2²¹ − 1, `Job.validateOptions`): a job's priority fills the high bits of a
 * score whose low 32 bits keep the order within a priority.
 */
export const MAX_CARD_PRIORITY = 2_097_151;

const utf8 = new TextEncoder();
/** The size a value takes as JSON, in UTF-8 bytes. */
const jsonBytes = (value: unknown): number => utf8.encode(JSON.stringify(value)).length;

/**
 * Text the agent gets as an environment variable (`LANES_CARD_TITLE`, `LANES_CARD_REPO`): a NUL
 * cannot be in one, so every command of the card would fail to start, on any provider.
 */
const envText = (max: number) =>
  z
    .string()
    .min(1)
    .max(max)
    .refine((text) => !text.includes('\u0000'), { message: 'must not contain a NUL character (it reaches the agent as an environment variable)' });

/** A PR card as a board sends it. Only `lane` and `title` are required. */
export const CardInputSchema = z.strictObject({
  id: CardIdSchema.optional(),
  lane: LaneNameSchema,
  title: envText(500),
  repo: envText(2048).optional(),
  pr: PullRequestSchema.optional(),
  prompt: z.string().max(1_000_000).optional(),
  priority: z.number().int().min(0).max(MAX_CARD_PRIORITY).default(0),
  callbackUrl: z.url().optional(),
  metadata: z
    .record(z.string(), z.json())
    .refine((m) => jsonBytes(m) <= MAX_CARD_METADATA_BYTES, { message: `must be at most ${MAX_CARD_METADATA_BYTES} bytes as JSON` })
    .optional(),
  /** Cards of one key (e.g. `owner/repo`) run at most the lane's `maxRunningPerKey` at a time. */
  concurrencyKey: ConcurrencyKeySchema.optional(),
  /** The newest card of a key (e.g. `owner/repo#42`) on a lane wins; earlier ones are cancelled as superseded (supersede.ts). */
  supersedeKey: ConcurrencyKeySchema.optional(),
  /** Whether a newer card of its key cancels a running earlier one too; unset: the lane's `supersede`. */
  supersede: SupersedeModeSchema.optional(),
});
export type CardInput = z.input<typeof CardInputSchema>;

/** A card once accepted: the id is always present. */
export const CardSchema = CardInputSchema.extend({ id: CardIdSchema });
export type Card = z.infer<typeof CardSchema>;
