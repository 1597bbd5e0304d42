import { LanesError } from './lanes-error.js';

/** The provider could not be reached or refused for now (transport, 5xx, quota). Counts toward the breaker. */
export class ProviderUnavailableError extends LanesError {
  readonly code = 'PROVIDER_UNAVAILABLE';
  readonly retry = 'transient' as const;
  constructor(
    readonly provider: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`provider ${provider} unavailable: ${detail}`, options);
  }
}
