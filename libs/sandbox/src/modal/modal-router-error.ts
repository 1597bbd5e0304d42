import { type LanesError, ProviderUnavailableError, SandboxGoneError, type PollResult } from '@lanes/contracts';
import { MODAL_PROVIDER_NAME, claimsGone, describeModalError, toLanesError } from './modal-errors.js';

/**
 * How many times a call through the command router is tried again after the router said the sandbox
 * is gone and a poll found it live. One: a single stray NOT_FOUND from a retrying router costs a
 * poll and a second try, not the card; one that persists reaches the caller as transient trouble,
 * and the supervisor's probe (poll, then the nonce canary) decides.
 */
export const ROUTER_NOT_FOUND_RETRIES = 1;

/**
 * What a failed call through a sandbox's command router came to, once read by the one rule:
 * - `gone`: the router said gone and a poll confirmed it (exited or missing): the explicit finding;
 * - `live`: the router said gone, but the sandbox polls live: not a finding. The caller may try the
 *   call again (`mayRetry`); `error` is what to throw if it does not;
 * - `failed`: anything else (transport, invalid), or a "gone" claim the poll could not check:
 *   `error` is the mapped error, never `SandboxGoneError`.
 */
export type RouterErrorReading = { kind: 'gone'; error: SandboxGoneError } | { kind: 'live'; error: ProviderUnavailableError } | { kind: 'failed'; error: LanesError };

/**
 * The rule for every call through a Modal sandbox's command router (exec start, exec wait, the
 * kill exec, file operations), in one place: the router's "gone" (`claimsGone`: NOT_FOUND,
 * FAILED_PRECONDITION, the SDK's NotFoundError or ConflictError) is a suspect, and one control-plane
 * poll decides. Only that poll's finding says gone (DESIGN rule 2, STYLE: only an explicit finding
 * destroys); what it found is kept on the error (`observedExitCode`), and the handle's poll caches it.
 */
export async function readRouterError(err: unknown, sandboxId: string, poll: () => Promise<PollResult>): Promise<RouterErrorReading> {
  // Not a "gone" claim: the sandbox scope cannot read it as gone either.
  if (!claimsGone(err)) return { kind: 'failed', error: toLanesError(err, { kind: 'sandbox', sandboxId }) };
  const said = describeModalError(err);
  let found: PollResult;
  try {
    found = await poll();
  } catch (pollErr) {
    const why = pollErr instanceof Error ? pollErr.message : String(pollErr);
    return {
      kind: 'failed',
      error: new ProviderUnavailableError(MODAL_PROVIDER_NAME, `the router said the sandbox is gone (${said}) and the poll could not tell (${why})`, { cause: err }),
    };
  }
  switch (found.state) {
    case 'exited':
      return { kind: 'gone', error: new SandboxGoneError(sandboxId, `exited(${found.exitCode}); the router said ${said}`, { cause: err, observedExitCode: found.exitCode }) };
    case 'missing':
      return { kind: 'gone', error: new SandboxGoneError(sandboxId, `missing; the router said ${said}`, { cause: err }) };
    case 'live':
      return {
        kind: 'live',
        error: new ProviderUnavailableError(MODAL_PROVIDER_NAME, `the router said the sandbox is gone (${said}) but it polls live: not a finding`, { cause: err }),
      };
  }
}

/** Whether a call whose failure read `reading` on try number `tries` (1-based) is tried again. */
export function mayRetry(reading: RouterErrorReading, tries: number): boolean {
  return reading.kind === 'live' && tries <= ROUTER_NOT_FOUND_RETRIES;
}
