import { ProviderInvalidError } from '@lanes/contracts';
import { MODAL_PROVIDER_NAME } from './modal-errors.js';

/**
 * The Modal SDK (modal@0.11) takes timeouts in milliseconds but sends whole seconds: it rejects any
 * exec `timeoutMs`, sandbox `timeoutMs`/`idleTimeoutMs` or `ttlMs` that is not a positive multiple
 * of this, with a plain `Error` (no class to tell it from a transport failure).
 */
export const MODAL_TIMEOUT_GRANULARITY_MS = 1_000;

/**
 * Every timeout the provider hands to the SDK goes through here: rounded UP to whole seconds, so a
 * backstop never fires before the deadline it backs (deadline + grace + margin is rarely whole).
 * A value no rounding can fix (not finite, not positive) is a configuration or programming error:
 * ProviderInvalidError naming the parameter and the value, raised before any SDK call, so it can
 * never read as an outage.
 */
export function sdkTimeoutMs(name: string, ms: number): number {
  if (!Number.isFinite(ms) || ms <= 0) {
    throw new ProviderInvalidError(MODAL_PROVIDER_NAME, `${name} must be a positive, finite number of milliseconds, got ${ms}`);
  }
  return Math.ceil(ms / MODAL_TIMEOUT_GRANULARITY_MS) * MODAL_TIMEOUT_GRANULARITY_MS;
}
