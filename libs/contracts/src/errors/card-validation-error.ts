import { LanesError } from './lanes-error.js';
import { describeIssues, type ValidationIssue } from './validation-issue.js';

/** A card (from HTTP or a raw BullMQ job) failed its schema. Retrying cannot help. */
export class CardValidationError extends LanesError {
  readonly code = 'CARD_INVALID';
  readonly retry = 'permanent' as const;
  constructor(readonly issues: ValidationIssue[]) {
    super(`invalid card: ${describeIssues(issues)}`);
  }
}
