import { join } from 'node:path';
import { Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * Issue 25, Deliver 2: a command router's NOT_FOUND on a live sandbox is a suspect, never a
 * finding. On the real SDK (modal@0.11.1) over the local Modal server, a lane's card meets stray
 * NOT_FOUNDs from the router of a healthy sandbox; the sandbox and the card survive.
 * Before: the first NOT_FOUND was read as the sandbox's death; the live sandbox was terminated, the
 * card blocked sandbox-dead, an infra retry spent, and the card ran on a new sandbox.
 */
describe('a stray NOT_FOUND from the command router of a live Modal sandbox (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;

  const LANE = 'modal-nf';
  /** The execs the server started in a sandbox since `since` whose argv contains `marker`. */
  const execsSince = (sandboxId: string, marker: string, since: number) =>
    (server.sandbox(sandboxId)?.execs ?? []).filter((e) => e.startedAt >= since && e.argv.some((a) => a.includes(marker)));
  const liveSandbox = async (): Promise<string> =>
    waitFor('the lane to have a live sandbox', async () => {
      const slot = (await t.api.lanes()).find((l) => l.name === LANE)?.slots[0];
      return slot?.sandbox?.state === 'live' ? slot.sandbox.id : undefined;
    });

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer();
    t = await startTestStack(redis.url, [{ name: LANE, slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, canaryTimeoutMs: 5_000 }], {
      wrap: () => new ModalProvider(server.client(), { appName: 'lanes-e2e-nf', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true }),
    });
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
  });

  it("one on the agent's exec start: a poll finds the sandbox live and the start is tried again; done on the same sandbox, nothing spent", async () => {
    const sandboxId = await liveSandbox();
    const since = Date.now();
    const polls = server.faults.calls('SandboxWaitV2', sandboxId);
    server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 1, sandboxId, argvIncludes: DEMO_AGENT });
    await t.api.request('POST', '/v1/cards', { id: 'nf-1', lane: LANE, title: 'stray start' });
    const done = await t.api.waitCard('nf-1', 'done', (c) => c.state === 'done', 30_000);
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 0 });
    expect(done.history.some((h) => h.state === 'blocked')).toBe(false);
    expect(server.faults.calls('SandboxWaitV2', sandboxId)).toBeGreaterThan(polls);
    expect(execsSince(sandboxId, DEMO_AGENT, since)).toHaveLength(1);
    expect(server.faults.calls('SandboxTerminateV2', sandboxId)).toBe(0);
    expect(server.sandbox(sandboxId)!.running).toBe(true);
  });

  it("one on the agent's exec wait while it runs: the agent is waited for again, not killed or re-run; done on the same sandbox, nothing spent", async () => {
    const sandboxId = await liveSandbox();
    const since = Date.now();
    await t.api.request('POST', '/v1/cards', { id: 'nf-2', lane: LANE, title: 'stray wait', metadata: { sleepMs: 2_000 } });
    await waitFor('the agent to start', () => execsSince(sandboxId, DEMO_AGENT, since).length === 1);
    await waitFor('the agent wait to be in flight', () => server.faults.calls('TaskExecWait', sandboxId) >= (server.sandbox(sandboxId)?.execs.length ?? 0));
    // Cut the wait's long-poll: the SDK redials it, and the router answers that once with NOT_FOUND.
    server.faults.fail('TaskExecWait', { code: Status.NOT_FOUND, times: 1, sandboxId });
    expect(server.dropRouterConnections()).toBeGreaterThan(0);
    const done = await t.api.waitCard('nf-2', 'done', (c) => c.state === 'done', 30_000);
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 0 });
    expect(done.history.some((h) => h.state === 'blocked')).toBe(false);
    expect(execsSince(sandboxId, DEMO_AGENT, since)).toHaveLength(1);
    expect(execsSince(sandboxId, 'lanes-kill', since)).toHaveLength(0);
    expect(server.faults.calls('SandboxTerminateV2', sandboxId)).toBe(0);
  });

  it("one that outlasts the handle's retry: the supervisor polls, the canary answers, and the card re-runs on the same sandbox (no sandbox-dead, no attempt)", async () => {
    const sandboxId = await liveSandbox();
    const since = Date.now();
    // Both starts of the agent's first run are refused; the kill exec between them, the probe's
    // canary and the re-run are not.
    server.faults.fail('TaskExecStart', { code: Status.NOT_FOUND, times: 2, sandboxId, argvIncludes: DEMO_AGENT });
    await t.api.request('POST', '/v1/cards', { id: 'nf-3', lane: LANE, title: 'persistent start' });
    const done = await t.api.waitCard('nf-3', 'done', (c) => c.state === 'done', 30_000);
    // The re-run of a command whose fate transport lost spends an infra retry, never an attempt.
    expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 1 });
    expect(done.history.some((h) => h.state === 'blocked' && h.blockedReason === 'sandbox-dead')).toBe(false);
    // The supervisor's probe ran its nonce canary in this sandbox: a cached "gone" did not refuse it.
    expect(execsSince(sandboxId, 'lanes-canary', since)).not.toHaveLength(0);
    expect(execsSince(sandboxId, DEMO_AGENT, since)).toHaveLength(1);
    expect(server.faults.calls('SandboxTerminateV2', sandboxId)).toBe(0);
    expect(server.sandbox(sandboxId)!.running).toBe(true);
  });
});
