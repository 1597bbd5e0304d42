import { LanesError } from './lanes-error.js';
import { describeIssues, type ValidationIssue } from './validation-issue.js';

/** The lanes config or environment is wrong; the process must not start. */
export class ConfigError extends LanesError {
  readonly code = 'CONFIG_INVALID';
  readonly retry = 'permanent' as const;
  constructor(
    readonly issues: ValidationIssue[],
    source = 'config',
  ) {
    super(`invalid ${source}: ${describeIssues(issues)}`);
  }
}
