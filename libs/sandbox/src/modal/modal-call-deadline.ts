import { ProviderUnavailableError } from '@lanes/contracts';
import { DeadlineExceeded, withDeadline } from '../deadline.js';
import { MODAL_PROVIDER_NAME } from './modal-errors.js';

/**
 * Bounds one SDK call the SDK itself leaves unbounded (control-plane calls carry no deadline; a file
 * operation waits on its helper exec forever). Past `timeoutMs` the call is abandoned and reported as
 * transient trouble, never a hang; its own failure, if it comes later, is swallowed.
 */
export async function withCallDeadline<T>(what: string, op: Promise<T>, timeoutMs: number): Promise<T> {
  try {
    return await withDeadline(op, timeoutMs);
  } catch (err) {
    if (!(err instanceof DeadlineExceeded)) throw err;
    op.catch(() => {});
    throw new ProviderUnavailableError(MODAL_PROVIDER_NAME, `${what} did not answer within ${timeoutMs} ms`, { cause: err });
  }
}
