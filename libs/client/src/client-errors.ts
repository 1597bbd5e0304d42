import { LanesError, type ValidationIssue } from '@lanes/contracts';

/**
 * The API answered with an error: `code` is the API's stable code (`CARD_INVALID`, `NOT_FOUND`,
 * `CARD_CONFLICT`, `UNAUTHORIZED`, …); branch on it, never on the message.
 */
export class LanesApiError extends LanesError {
  readonly retry;
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly issues?: ValidationIssue[],
    /** The API's Retry-After, where it said one (429 RATE_LIMITED): wait this long before posting again. */
    readonly retryAfterMs?: number,
  ) {
    super(`${code}: ${message}`);
    // 5xx and 429 may pass; anything else the API will answer the same way again.
    this.retry = status >= 500 || status === 429 ? ('transient' as const) : ('permanent' as const);
  }
}

/** No answer at all: the API is down, unreachable, or the request timed out. */
export class LanesUnreachableError extends LanesError {
  readonly code = 'API_UNREACHABLE';
  readonly retry = 'transient' as const;
  constructor(
    readonly url: string,
    cause: unknown,
  ) {
    super(`cannot reach the lanes API at ${url}: ${cause instanceof Error ? cause.message : String(cause)}`, { cause });
  }
}
