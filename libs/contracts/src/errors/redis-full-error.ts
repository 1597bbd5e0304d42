import { LanesError } from './lanes-error.js';

/**
 * Redis refused a write because it is at its `maxmemory` (an OOM reply under `noeviction`). Nothing
 * of the refused command was written; it may succeed once memory is freed (cards expire, an operator
 * raises `maxmemory`).
 */
export class RedisFullError extends LanesError {
  readonly code = 'REDIS_FULL';
  readonly retry = 'transient' as const;
  constructor(options?: { cause?: unknown }) {
    super('redis is full (maxmemory reached); nothing was written, retry once memory is freed', options);
  }
}
