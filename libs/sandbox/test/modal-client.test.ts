import { existsSync } from 'node:fs';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { ProviderInvalidError } from '@lanes/contracts';
import type { ModalClient } from 'modal';
import { DEFAULT_MODAL_CALL_TIMEOUT_MS, MODAL_MAX_THROTTLE_WAIT_SECS, createModalClient, createModalProvider } from '@lanes/sandbox/modal';

// The SDK also takes credentials from the environment and ~/.modal.toml: only a machine with
// neither can show what happens without any.
const credentialsAround =
  Boolean(process.env['MODAL_TOKEN_ID'] || process.env['MODAL_TOKEN_SECRET'] || process.env['MODAL_CONFIG_PATH']) || existsSync(join(homedir(), '.modal.toml'));

async function waitUntil(ok: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!ok()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 10));
  }
}

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

  it('with a token it builds without a network call: a server it is pointed at sees no connection until a call is made', async () => {
    const connections: Socket[] = [];
    const server = createServer((socket) => {
      connections.push(socket);
      socket.destroy();
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const before = process.env['MODAL_SERVER_URL'];
    process.env['MODAL_SERVER_URL'] = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    try {
      const client = createModalClient({ tokenId: 'ak-x', tokenSecret: 'as-x' }) as unknown as ModalClient;
      // Time enough for an eager connect (a channel that dials on construction) to show.
      await new Promise((r) => setTimeout(r, 300));
      expect(connections).toHaveLength(0);
      // The counter works: the first call dials that server.
      // (The SDK retries the failed call for a few seconds after close; it is not waited for.)
      void client.apps.fromName('lanes-probe').catch(() => undefined);
      await waitUntil(() => connections.length > 0);
      client.close();
    } finally {
      if (before === undefined) delete process.env['MODAL_SERVER_URL'];
      else process.env['MODAL_SERVER_URL'] = before;
      await new Promise((r) => server.close(r));
    }
  });
});
