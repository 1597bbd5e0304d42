import { z } from 'zod';
import { LaneNameSchema } from './card.js';
import { MAX_TOKEN_CARDS_PER_S, MAX_TOKEN_REQUESTS_PER_S } from './defaults.js';

/**
 * What a token may do. `read`: GET anything in its lanes. `write`: also enqueue, cancel and unblock
 * there. `admin`: also Bull Board's changes (retry, clean, pause…). Each role includes the ones before it.
 */
export const TokenRoleSchema = z.enum(['read', 'write', 'admin']);
export type TokenRole = z.infer<typeof TokenRoleSchema>;

/** An environment variable name, as POSIX shells allow them. */
export const EnvNameSchema = z.string().regex(/^[A-Za-z_][A-Za-z0-9_]*$/, 'must be an environment variable name');

/**
 * A scoped API token in the config file. The token's value is never in the file: either its SHA-256
 * (`sha256`, 64 hex digits) or the environment variable that holds it (`fromEnv`), exactly one.
 * `name` is what logs and errors call it.
 */
export const ApiTokenConfigSchema = z
  .strictObject({
    name: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'must be 1-64 characters of [A-Za-z0-9._-]'),
    sha256: z
      .string()
      .regex(/^[0-9a-fA-F]{64}$/, 'must be 64 hex digits (the SHA-256 of the token)')
      .transform((hex) => hex.toLowerCase())
      .optional(),
    fromEnv: EnvNameSchema.optional(),
    lanes: z.union([z.literal('*'), z.array(LaneNameSchema).min(1, 'must name at least one lane, or be "*"')]),
    role: TokenRoleSchema,
    /** Cards per second the token may post (POST /v1/cards, retries), across every API process (one bucket in Redis); unset: DEFAULT_TOKEN_CARDS_PER_S. */
    cardsPerSecond: z.number().positive().max(MAX_TOKEN_CARDS_PER_S).optional(),
    /** Requests per second the token may make of any kind, per API process; unset: DEFAULT_TOKEN_REQUESTS_PER_S. */
    requestsPerSecond: z.number().positive().max(MAX_TOKEN_REQUESTS_PER_S).optional(),
  })
  .superRefine((token, ctx) => {
    if ((token.sha256 === undefined) === (token.fromEnv === undefined)) {
      ctx.addIssue({ code: 'custom', path: ['sha256'], message: 'give exactly one of sha256 and fromEnv' });
    }
  });
export type ApiTokenConfig = z.infer<typeof ApiTokenConfigSchema>;
