import { LanesError } from './lanes-error.js';

/** A new sandbox missed its connect deadline. Counts toward the breaker; the sandbox is terminated by id. */
export class ConnectTimeoutError extends LanesError {
  readonly code = 'CONNECT_TIMEOUT';
  readonly retry = 'transient' as const;
  constructor(
    readonly provider: string,
    readonly timeoutMs: number,
    readonly sandboxId?: string,
  ) {
    super(`sandbox${sandboxId ? ` ${sandboxId}` : ''} on ${provider} did not connect within ${timeoutMs} ms`);
  }
}
