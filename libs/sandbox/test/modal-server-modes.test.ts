import { join } from 'node:path';
import { Status } from 'nice-grpc';
import { afterEach, describe, expect, it } from 'vitest';
import { ProviderUnavailableError } from '@lanes/contracts';
import { MODAL_MAX_THROTTLE_WAIT_SECS, ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer, type ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { MODAL_TEST_LIVENESS_POLL_MS, modalTestSpec } from './support/modal-fixture.js';
import { outputWatcher } from './support/wait-for.js';

// The local Modal server's other forms (issue 25, Deliver 3.4-3.6; docs/modal.md), each driven
// through the provider on the real SDK (modal@0.11.1): listings without tags, a throttled create
// with a server retry-after, and router tokens that expire in seconds.

let server: LocalModalServer | undefined;
let provider: ModalProvider | undefined;
afterEach(async () => {
  await provider?.close();
  await server?.close();
  provider = undefined;
  server = undefined;
});

/** A server in `options`' form and the provider on a client built the way lanes builds it (its throttle bound). */
async function start(options: ModalServerOptions = {}): Promise<{ server: LocalModalServer; provider: ModalProvider }> {
  server = await startModalServer(options);
  provider = new ModalProvider(server.client({ maxThrottleWaitSecs: MODAL_MAX_THROTTLE_WAIT_SECS }), {
    appName: 'lanes-modes',
    workdir: join(server.rootDir, 'work'),
    livenessPollIntervalMs: MODAL_TEST_LIVENESS_POLL_MS,
    ownsClient: true,
  });
  return { server, provider };
}

describe('listings', () => {
  it('without tags (SandboxInfo.tags left empty): the tag filter still selects, and each ref comes back with no tags', async () => {
    const { provider: p } = await start({ controlPlane: { listTags: false } });
    const a = await p.create(modalTestSpec('a'));
    const b = await p.create(modalTestSpec('b'));
    expect((await p.list({ slot: 'b' })).map((r) => r.id)).toEqual([b.id]);
    const refs = await p.list({ lane: 'contract' });
    expect(refs.map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
    for (const ref of refs) expect(ref.tags).toEqual({});
  });

  it('with tags (the default): each ref carries lane, slot and worker', async () => {
    const { provider: p } = await start();
    const a = await p.create(modalTestSpec('a'));
    expect(await p.list({ slot: 'a' })).toEqual([{ id: a.id, tags: modalTestSpec('a').tags }]);
  });
});

describe('throttling (RESOURCE_EXHAUSTED with a server retry-after)', () => {
  it('a throttled create waits out the retry-after inside the SDK and succeeds', async () => {
    const { server: s, provider: p } = await start();
    s.faults.fail('SandboxCreateV2', { code: Status.RESOURCE_EXHAUSTED, times: 2, retryAfterSecs: 1 });
    const startedAt = Date.now();
    const handle = await p.create(modalTestSpec(), { connectTimeoutMs: 20_000 });
    // Two retry-afters of a second each, waited out by the SDK's retryMiddleware.
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_900);
    expect(s.faults.calls('SandboxCreateV2')).toBe(3);
    expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0, stdout: 'ok\n' });
  });

  it('a retry-after past the client bound (maxThrottleWaitSecs) is given up at once: ProviderUnavailableError, breaker fuel', async () => {
    const { server: s, provider: p } = await start();
    s.faults.fail('SandboxCreateV2', { code: Status.RESOURCE_EXHAUSTED, times: 1, retryAfterSecs: MODAL_MAX_THROTTLE_WAIT_SECS + 10 });
    const startedAt = Date.now();
    await expect(p.create(modalTestSpec(), { connectTimeoutMs: 20_000 })).rejects.toBeInstanceOf(ProviderUnavailableError);
    expect(Date.now() - startedAt).toBeLessThan(MODAL_MAX_THROTTLE_WAIT_SECS * 1_000);
    expect(s.faults.calls('SandboxCreateV2')).toBe(1);
  });
});

describe('router tokens that expire in seconds', () => {
  it('the SDK refreshes an expired token (UNAUTHENTICATED → SandboxGetCommandRouterAccess) and the commands never notice', async () => {
    const { server: s, provider: p } = await start({ controlPlane: { routerTokenLifetimeSecs: 2 } });
    const handle = await p.create(modalTestSpec());
    const refreshes = () => s.faults.calls('SandboxGetCommandRouterAccess');
    expect(refreshes()).toBe(0);
    // A command that outlives several token lifetimes, its streams and wait cut every second: each
    // redial goes out with an expired token.
    const watcher = outputWatcher('tick 5');
    const running = handle.exec(['sh', '-c', 'for i in 1 2 3 4 5 6; do echo "tick $i"; sleep 1; done'], { onOutput: watcher.onOutput });
    const cutter = setInterval(() => s.dropRouterConnections(), 1_000);
    try {
      await watcher.seen;
    } finally {
      clearInterval(cutter);
    }
    expect(await running).toMatchObject({ exitCode: 0, stdout: 'tick 1\ntick 2\ntick 3\ntick 4\ntick 5\ntick 6\n' });
    // A new command and a file write, each starting with an expired token.
    await new Promise((r) => setTimeout(r, 2_100));
    expect(await handle.exec(['echo', 'after'])).toMatchObject({ exitCode: 0, stdout: 'after\n' });
    await handle.writeFile('t.txt', 'token');
    expect(refreshes()).toBeGreaterThan(0);
  });
});
