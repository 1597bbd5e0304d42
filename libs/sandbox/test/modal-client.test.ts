import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProviderInvalidError } from '@lanes/contracts';
import type { ModalClient } from 'modal';
import { DEFAULT_MODAL_CALL_TIMEOUT_MS, MODAL_MAX_THROTTLE_WAIT_SECS, createModalClient, createModalProvider } from '@lanes/sandbox';

// The SDK also takes credentials from the environment and ~/.modal.toml: only a machine with
// neither can show what happens without any.
const credentialsAround =
  Boolean(process.env['MODAL_TOKEN_ID'] || process.env['MODAL_TOKEN_SECRET'] || process.env['MODAL_CONFIG_PATH']) || existsSync(join(homedir(), '.modal.toml'));

describe('createModalClient', () => {
  // Before: the SDK failed the first call with a plain Error ("Profile is missing credentials"),
  // which the provider classed as an outage and fed to the breaker.
  it.skipIf(credentialsAround)('without credentials it is a configuration error at construction, naming what to set', () => {
    const error = (() => {
      try {
        createModalProvider({ env: {} });
        return undefined;
      } catch (e) {
        return e;
      }
    })();
    expect(error).toBeInstanceOf(ProviderInvalidError);
    expect((error as Error).message).toContain('MODAL_TOKEN_ID');
  });

  it("bounds the SDK's throttle wait (unbounded when unset), below the call deadline", () => {
    const client = createModalClient({ tokenId: 'ak-x', tokenSecret: 'as-x' }) as unknown as ModalClient;
    expect(client.profile.maxThrottleWaitSecs).toBe(MODAL_MAX_THROTTLE_WAIT_SECS);
    expect(MODAL_MAX_THROTTLE_WAIT_SECS * 1000).toBeLessThan(DEFAULT_MODAL_CALL_TIMEOUT_MS);
    client.close();
  });

  it('with a token it builds without a network call', () => {
    expect(() => createModalClient({ tokenId: 'ak-x', tokenSecret: 'as-x' }).close()).not.toThrow();
  });
});
