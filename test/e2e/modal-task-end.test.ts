import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { checkedExec } from '@lanes/runner';
import type { SandboxHandle } from '@lanes/sandbox';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer, type ModalServerOptions } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * Issue 25, Deliver 3 at lane level, on the real SDK (modal@0.11.1) over the local Modal server in
 * its Modal-like default: a command running when its sandbox's task ends comes back as exit 137 (the
 * container's SIGKILL), and only the supervisor's one poll (rule 1) tells that the sandbox died.
 * The lane's liveness poll is slowed down so it cannot race the exit status to the death.
 */
describe('a Modal sandbox that ends under a running command (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;
  const LANE = 'modal-end';

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer();
    t = await startTestStack(
      redis.url,
      [{ name: LANE, slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } }],
      {
        wrap: () => new ModalProvider(server.client(), { appName: 'lanes-e2e-end', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 60_000, ownsClient: true }),
      },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
  });

  it('terminated while the agent runs, whose exec ends 137: blocked sandbox-dead with observed 137 and attempts 1, then done on a new sandbox', async () => {
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 'end-1', lane: LANE, title: 'terminated', metadata: { sleepMs: 5_000 } });
    const running = await t.api.waitCard('end-1', 'running', (c) => c.state === 'running');
    const sandboxId = running.sandboxId!;
    await waitFor('the agent to start', () => (server.sandbox(sandboxId)?.execs ?? []).some((e) => e.startedAt >= since && e.argv.includes(DEMO_AGENT)));
    await waitFor('the agent wait to be in flight', () => server.faults.calls('TaskExecWait', sandboxId) >= (server.sandbox(sandboxId)?.execs.length ?? 0));
    const pollsBefore = server.faults.calls('SandboxWaitV2', sandboxId);
    server.terminateSandbox(sandboxId);
    const done = await t.api.waitCard('end-1', 'done', (c) => c.state === 'done', 30_000);
    const blocked = done.history.find((h) => h.state === 'blocked')!;
    expect(blocked).toMatchObject({ blockedReason: 'sandbox-dead', observedExitCode: 137, sandboxId });
    expect(done.sandboxId).not.toBe(sandboxId);
    expect(done).toMatchObject({ attempts: 1, infraRetries: 1 });
    // The death came back as the agent's exit status; the supervisor's one poll found it.
    expect(server.faults.calls('SandboxWaitV2', sandboxId) - pollsBefore).toBe(1);
  });
});

/** Whole seconds (the SDK's unit): long enough for the connect canary, short enough for a test. */
const SHORT_LIFETIME_MS = 3_000;
const MODES: ReadonlyArray<[string, ModalServerOptions]> = [
  ['default: the exec ends 137', {}],
  ['the exec ends as a NOT_FOUND', { router: { execsAtTaskEnd: 'error' } }],
  ['the exec ends as an UNAVAILABLE the SDK retries', { router: { finishedTaskCode: Status.UNAVAILABLE, execsAtTaskEnd: 'error' } }],
];

describe.each(MODES)("a sandbox's lifetime runs out under a command (%s)", (_mode, serverOptions) => {
  let server: LocalModalServer;
  let provider: ModalProvider;
  let handle: SandboxHandle | undefined;
  beforeAll(async () => {
    server = await startModalServer(serverOptions);
    provider = new ModalProvider(server.client(), { appName: 'lanes-e2e-lifetime', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true });
  });
  afterAll(async () => {
    await handle?.terminate().catch(() => undefined);
    await provider?.close();
    await server?.close();
  });

  it("the supervisor's check reads sandbox-dead with the sandbox's 124, not the command's failure", async () => {
    handle = await provider.create({ image: 'debian:bookworm-slim', tags: { lane: 'lifetime', slot: 's1', worker: 'w-lifetime' }, timeoutMs: SHORT_LIFETIME_MS });
    const checked = await checkedExec(
      handle,
      ['sh', '-c', 'echo working; exec sleep 30'],
      { timeoutMs: 60_000, killGraceMs: 200 },
      { newNonce: () => `lanes-canary-${randomUUID()}`, canaryTimeoutMs: 2_000 },
    );
    expect(checked).toMatchObject({ verdict: 'sandbox-dead', observedExitCode: 124, transportFailed: false });
  });
});
