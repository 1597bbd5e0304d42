import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * Idle probing on Modal with one hung poll (real SDK over the local server): the control plane
 * holds every SandboxWaitV2 about one sandbox far longer than the test. The provider's call deadline
 * is the default (30 s), so anything that waits on the hung poll waits past this test's timeout.
 */
describe('a hung idle poll on Modal (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer();
    t = await startTestStack(
      redis.url,
      [{ name: 'modal-idle', slots: 2, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } }],
      {
        // Only the worker's idle probing polls: no supervisor sweep in the way.
        parts: { api: true, worker: true, supervisor: false },
        wrap: () => new ModalProvider(server.client(), { appName: 'lanes-e2e-idle', workdir: join(server.rootDir, 'work'), ownsClient: true }),
      },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
  });

  const slots = async () => (await t.api.lanes())[0]!.slots;

  it('neither stops idle probing of the other slots nor blocks shutdown', async () => {
    await waitFor('both slots live', async () => (await slots()).every((s) => s.sandbox?.state === 'live'), { timeoutMs: 20_000 });
    const [hung, healthy] = (await slots()).map((s) => s.sandbox!.id);
    server.faults.delay('SandboxWaitV2', 600_000, { sandboxId: hung });
    await waitFor('an idle poll of one sandbox to hang', () => server.faults.delayed('SandboxWaitV2') > 0);

    // The other slot's sandbox dies between cards: its own idle probe still finds it, and it is replaced.
    server.killSandbox(healthy!);
    await waitFor('the dead sandbox to be replaced', async () => (await slots()).some((s) => s.sandbox?.state === 'live' && s.sandbox.id !== hung && s.sandbox.id !== healthy), {
      timeoutMs: 10_000,
    });

    // Shutdown completes while the hung poll is still held by the server.
    await t.stack.worker!.stop();
    expect(server.faults.delayed('SandboxWaitV2')).toBeGreaterThan(0);
    expect(server.sandbox(hung!)!.running).toBe(false);
  }, 25_000);
});
