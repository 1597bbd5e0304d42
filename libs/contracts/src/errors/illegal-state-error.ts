import { LanesError } from './lanes-error.js';

/** A method was called in a state that does not allow it: a bug in the caller. */
export class IllegalStateError extends LanesError {
  readonly code = 'ILLEGAL_STATE';
  readonly retry = 'permanent' as const;
}
