import type { z } from 'zod';
import { CardInputSchema, type Card } from './card.js';
import { CardValidationError } from './errors/card-validation-error.js';
import { ConfigError } from './errors/config-error.js';
import type { ValidationIssue } from './errors/validation-issue.js';
import { LanesConfigSchema, type LanesConfig } from './lane-config.js';

/** zod issues → `{path, message}` with a dotted path naming the field. */
export function toIssues(error: z.ZodError, prefix: readonly PropertyKey[] = []): ValidationIssue[] {
  return error.issues.map((issue) => {
    const keys = [...prefix, ...issue.path];
    const path = keys.map(String).join('.');
    const unknownKeys = issue.code === 'unrecognized_keys' ? ` (${issue.keys.join(', ')})` : '';
    return { path, message: `${issue.message}${unknownKeys}` };
  });
}

/**
 * Validates a card from any door (HTTP, raw BullMQ job). `makeId` supplies an id when the board sent none.
 * Throws CardValidationError naming each bad field.
 */
export function parseCard(input: unknown, makeId: () => string, prefix: readonly PropertyKey[] = []): Card {
  const parsed = CardInputSchema.safeParse(input);
  if (!parsed.success) throw new CardValidationError(toIssues(parsed.error, prefix));
  return { ...parsed.data, id: parsed.data.id ?? makeId() };
}

/** Validates a lanes config file's JSON. Throws ConfigError naming the wrong key. */
export function parseLanesConfig(input: unknown, source = 'config'): LanesConfig {
  const parsed = LanesConfigSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(toIssues(parsed.error), source);
  return parsed.data;
}
