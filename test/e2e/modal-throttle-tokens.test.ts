import { join } from 'node:path';
import { Redis } from 'ioredis';
import { Status } from 'nice-grpc';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { EventLog } from '@lanes/queue';
import { MODAL_MAX_THROTTLE_WAIT_SECS, ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/**
 * Issue 25, acceptance: on the real SDK (modal@0.11.1) over the local Modal server, a lane whose
 * first create is throttled (RESOURCE_EXHAUSTED with a server retry-after) goes live once the SDK
 * has waited it out, with no breaker tick; and a card that runs over several lifetimes of router
 * tokens that expire in seconds is not disturbed (the SDK refreshes them).
 */
describe('a Modal lane under throttling and short-lived router tokens (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;
  const LANE = 'modal-throttled';
  // CI runs a quick form (an 8 s card over 2 s tokens); the figures (5 s tokens under a 60 s
  // card) run with LANES_TEST_ROUTER_TOKEN_SECS=5 LANES_TEST_TOKEN_CARD_MS=60000.
  const TOKEN_LIFETIME_SECS = Number(process.env['LANES_TEST_ROUTER_TOKEN_SECS'] ?? 2);
  const CARD_MS = Number(process.env['LANES_TEST_TOKEN_CARD_MS'] ?? 8_000);

  const laneNow = async () => (await t.api.lanes()).find((l) => l.name === LANE)!;

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer({ controlPlane: { routerTokenLifetimeSecs: TOKEN_LIFETIME_SECS } });
    // The lane's first create: two throttled answers of a second each, before the stack starts.
    server.faults.fail('SandboxCreateV2', { code: Status.RESOURCE_EXHAUSTED, times: 2, retryAfterSecs: 1 });
    t = await startTestStack(redis.url, [{ name: LANE, slots: 1, agent: [process.execPath, DEMO_AGENT], killGraceMs: 200, breaker: { failureThreshold: 1, openMs: 1_000 } }], {
      // The client as lanes builds it (createModalClient): the SDK's throttle wait is bounded.
      wrap: () =>
        new ModalProvider(server.client({ maxThrottleWaitSecs: MODAL_MAX_THROTTLE_WAIT_SECS }), {
          appName: 'lanes-e2e-throttle',
          workdir: join(server.rootDir, 'work'),
          livenessPollIntervalMs: 50,
          ownsClient: true,
        }),
    });
  });
  afterAll(async () => {
    await t?.stop();
    await server?.close();
    await redis?.stop();
  });

  it('a throttled create waits for the retry-after and succeeds; the breaker (threshold 1) never opens', async () => {
    await waitFor('the lane to have a live sandbox', async () => (await laneNow()).slots[0]?.sandbox?.state === 'live', { timeoutMs: 30_000 });
    expect(server.faults.calls('SandboxCreateV2')).toBe(3);
    expect((await laneNow()).breaker.state).toBe('closed');
    const conn = new Redis(redis.url);
    try {
      const breakerEvents = (await new EventLog(conn).recent(500)).filter((e) => e.lane === LANE && e.type.startsWith('breaker.'));
      expect(breakerEvents).toEqual([]);
    } finally {
      conn.disconnect();
    }
  });

  it(`a ${CARD_MS / 1000} s card running over ${TOKEN_LIFETIME_SECS} s router-token lifetimes, its router connections cut each second, is done on the same sandbox with nothing spent`, {
    timeout: CARD_MS + 60_000,
  }, async () => {
    const sandboxId = (await laneNow()).slots[0]!.sandbox!.id;
    const refreshesBefore = server.faults.calls('SandboxGetCommandRouterAccess');
    await t.api.request('POST', '/v1/cards', { id: 'tok-1', lane: LANE, title: 'long', metadata: { sleepMs: CARD_MS } });
    await t.api.waitCard('tok-1', 'running', (c) => c.state === 'running');
    // Every redial of the agent's streams and wait goes out with an expired token.
    const cutter = setInterval(() => server.dropRouterConnections(), 1_000);
    try {
      const done = await t.api.waitCard('tok-1', 'done', (c) => c.state === 'done', CARD_MS + 32_000);
      expect(done).toMatchObject({ sandboxId, attempts: 1, infraRetries: 0 });
      expect(done.history.some((h) => h.state === 'blocked')).toBe(false);
    } finally {
      clearInterval(cutter);
    }
    expect(server.faults.calls('SandboxGetCommandRouterAccess') - refreshesBefore).toBeGreaterThan(0);
    expect(server.faults.calls('SandboxTerminateV2', sandboxId)).toBe(0);
  });
});
