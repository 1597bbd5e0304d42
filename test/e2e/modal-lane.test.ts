import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { ModalProvider } from '@lanes/sandbox';
import { startModalServer, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * The worker and the supervision loop on Modal: the lane's slots use the Modal provider on the real
 * SDK (modal@0.11.1) over the local Modal server (real processes; no per-process kill; terminate → 137).
 */
describe('a lane on the Modal provider (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer();
    t = await startTestStack(
      redis.url,
      [{ name: 'modal-lane', slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, respawn: { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 } }],
      {
        wrap: () =>
          new ModalProvider(server.client(), { appName: 'lanes-e2e', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true }),
      },
    );
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
  });

  it('runs a card to done in a Modal sandbox', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-1', lane: 'modal-lane', title: 'on modal', pr: { number: 3, branch: 'feat/m' } });
    const done = await t.api.waitCard('m-1', 'done', (c) => c.state === 'done');
    expect(done.result).toMatchObject({ branch: 'feat/m' });
    expect(server.runningSandboxIds()).toContain(done.sandboxId);
    const slot = (await t.api.lanes())[0]!.slots[0]!;
    expect(slot.sandbox).toMatchObject({ id: done.sandboxId, state: 'live', provider: 'modal' });
  });

  it('cancel kills the command through a second exec; the same Modal sandbox runs the next card', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-2', lane: 'modal-lane', title: 'long', metadata: { sleepMs: 30_000 } });
    const running = await t.api.waitCard('m-2', 'running', (c) => c.state === 'running');
    await t.api.request('POST', '/v1/cards/m-2/cancel');
    await t.api.waitCard('m-2', 'cancelled', (c) => c.state === 'cancelled', 10_000);
    await t.api.request('POST', '/v1/cards', { id: 'm-3', lane: 'modal-lane', title: 'next' });
    expect((await t.api.waitCard('m-3', 'done', (c) => c.state === 'done')).sandboxId).toBe(running.sandboxId);
  });

  it('a Modal sandbox terminated mid-card is dead (137), replaced, and the card re-driven to done', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-4', lane: 'modal-lane', title: 'interrupted', metadata: { sleepMs: 1_500 } });
    const running = await t.api.waitCard('m-4', 'running', (c) => c.state === 'running');
    const pollsBefore = server.faults.calls('SandboxWaitV2', running.sandboxId!);
    server.killSandbox(running.sandboxId!);
    const done = await t.api.waitCard('m-4', 'done', (c) => c.state === 'done', 30_000);
    const blocked = done.history.find((h) => h.state === 'blocked')!;
    expect(blocked).toMatchObject({ blockedReason: 'sandbox-dead', observedExitCode: 137, sandboxId: running.sandboxId });
    expect(done.sandboxId).not.toBe(running.sandboxId);
    expect(done.attempts).toBe(1);
    expect(done.infraRetries).toBe(1);
    // The exit code came from the poll made while the command ran; recovery did not poll again.
    expect(server.faults.calls('SandboxWaitV2', running.sandboxId!) - pollsBefore).toBe(1);
  });

  it('a router connection dropped mid-card: the SDK resumes and the card reaches done in the same sandbox', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-8', lane: 'modal-lane', title: 'dropped', metadata: { sleepMs: 1_500 } });
    const running = await t.api.waitCard('m-8', 'running', (c) => c.state === 'running');
    await waitFor('a router connection to drop', () => server.dropRouterConnections() > 0);
    const done = await t.api.waitCard('m-8', 'done', (c) => c.state === 'done');
    expect(done).toMatchObject({ sandboxId: running.sandboxId, attempts: 1 });
  });

  it('the control plane answers UNAVAILABLE for 20 s while a slot needs a new sandbox: breaker opens, cards wait, all reach done, the outage clears', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'm-5', lane: 'modal-lane', title: 'dies', metadata: { sleepMs: 3_000 } });
    const running = await t.api.waitCard('m-5', 'running', (c) => c.state === 'running');
    // Creates fail from the kill on, so the respawn (20 ms backoff) cannot slip in before the outage;
    // the whole control plane goes down once the death has been seen (a dead poll needs it up).
    server.faults.fail('SandboxCreateV2', { forMs: 20_000 });
    server.killSandbox(running.sandboxId!);
    await t.api.waitCard('m-5', 'blocked (sandbox-dead)', (c) => c.state === 'blocked' && c.blockedReason === 'sandbox-dead');
    server.faults.fail('ModalClient', { forMs: 20_000 });
    for (const id of ['m-6', 'm-7']) await t.api.request('POST', '/v1/cards', { id, lane: 'modal-lane', title: id });
    await waitFor('the breaker to open and the lane to read outage', async () => {
      const lane = (await t.api.lanes())[0]!;
      return lane.breaker.state === 'open' && lane.outage;
    }, { timeoutMs: 20_000 });
    await t.api.waitCard('m-6', 'blocked (provider-outage)', (c) => c.state === 'blocked' && c.blockedReason === 'provider-outage', 20_000);
    for (const id of ['m-5', 'm-6', 'm-7']) await t.api.waitCard(id, 'done', (c) => c.state === 'done', 90_000);
    await waitFor('the outage flag to clear', async () => !(await t.api.lanes())[0]!.outage);
  }, 150_000);
});
