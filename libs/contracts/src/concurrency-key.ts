import { z } from 'zod';
import { SUPERSEDE_WAITING } from './supersede.js';

/**
 * The longest `concurrencyKey`. An `owner/repo` on GitHub is at most 39 + 1 + 100 characters; a key
 * names a few Redis keys (names.ts `keyRunning`, `keyWaiting`), so it is kept well short of a
 * path parameter's length.
 */
export const CONCURRENCY_KEY_MAX_LENGTH = 200;

/**
 * A key a board chooses (`owner/repo`, `team@host`, `org/repo#42`): letters, digits and
 * `. _ - / # @ +`, starting with a letter or digit. No whitespace, control characters or ':'
 * (which would read as a separator in the Redis key names the key is part of).
 */
export const CONCURRENCY_KEY_PATTERN = new RegExp(`^[A-Za-z0-9][A-Za-z0-9._/#@+-]{0,${CONCURRENCY_KEY_MAX_LENGTH - 1}}$`);

export const ConcurrencyKeySchema = z
  .string()
  .regex(CONCURRENCY_KEY_PATTERN, `must be 1-${CONCURRENCY_KEY_MAX_LENGTH} characters of [A-Za-z0-9._/#@+-], starting with a letter or digit`);

/** The most cards of one key a lane runs at once, across all its workers (a lane without it has no key limit). */
export const MaxRunningPerKeySchema = z.number().int().positive().max(10_000);

/**
 * What a queued card waits for, beside its state: a card over its key's limit (`maxRunningPerKey`),
 * or one whose supersede key's earlier card still runs (supersede.ts), parked without a slot until
 * a card of its key ends. Its state stays `queued` (DESIGN's lifecycle has no waiting state).
 */
export const KEY_LIMIT_WAITING = 'waiting (key limit)';
export const StateDetailSchema = z.enum([KEY_LIMIT_WAITING, SUPERSEDE_WAITING]);
export type StateDetail = z.infer<typeof StateDetailSchema>;
