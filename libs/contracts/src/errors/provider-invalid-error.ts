import { LanesError } from './lanes-error.js';

/** The provider rejected the request itself (bad image, bad argument, auth). Retrying cannot help. */
export class ProviderInvalidError extends LanesError {
  readonly code = 'PROVIDER_INVALID';
  readonly retry = 'permanent' as const;
  constructor(
    readonly provider: string,
    detail: string,
    options?: { cause?: unknown },
  ) {
    super(`provider ${provider} rejected the request: ${detail}`, options);
  }
}
