import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventLog, FleetStore } from '@lanes/queue';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer, type LocalModalServer } from '@lanes/sandbox/testing/modal-server';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

const HEARTBEAT_INTERVAL_MS = 500;
const LOCK_DURATION_MS = 3_000;

/**
 * Modal's SandboxInfo.tags is "not yet exposed in client library": a listing may carry no tags, so
 * orphan reaping must not depend on them. The local server lists without tags here; the owner comes
 * from the record lanes keeps of every sandbox it creates.
 */
describe('orphan reaping on Modal when listings carry no tags (real SDK, local server)', () => {
  let redis: TestRedis;
  let server: LocalModalServer;
  let t: TestStack;
  let conn: Redis;
  const provider = () => new ModalProvider(server.client(), { appName: 'lanes-untagged', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true });

  beforeAll(async () => {
    redis = await startRedis();
    server = await startModalServer({ controlPlane: { listTags: false } });
    conn = new Redis(redis.url);
    // The lane's provider is the Modal one below (as in modal-lane.test.ts): the config needs no credentials.
    t = await startTestStack(redis.url, [{ name: 'untagged', slots: 1, agent: ['true'] }], {
      parts: { api: true, worker: false, supervisor: true },
      heartbeatIntervalMs: HEARTBEAT_INTERVAL_MS,
      lockDurationMs: LOCK_DURATION_MS,
      wrap: () => provider(),
    });
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    await server?.close();
    await redis?.stop();
  });

  it('a worker that goes silent leaves Modal sandboxes; once its silence outlasts the lock, the ones lanes recorded as its are terminated by id, and one it has no record of is kept', async () => {
    // The worker's side, as a worker does it: create through the SDK with its tags, record the sandbox, beat.
    const owner = 'w-untagged-1';
    const creator = provider();
    const mine = await creator.create({ image: 'debian:bookworm-slim', tags: { lane: 'untagged', slot: `${owner}-untagged-0`, worker: owner } });
    const stranger = await creator.create({ image: 'debian:bookworm-slim', tags: { lane: 'untagged', slot: 'elsewhere-0', worker: 'w-not-lanes' } });
    const listed = await creator.list();
    expect(listed.map((s) => s.id).sort()).toEqual([mine.id, stranger.id].sort());
    expect(listed.every((s) => !s.tags.worker)).toBe(true);
    const fleet = new FleetStore(conn);
    await fleet.putSandbox({ id: mine.id, provider: 'modal', state: 'live', lane: 'untagged', slot: `${owner}-untagged-0`, worker: owner });
    let seq = 0;
    // The worker's silence begins at its last beat, not when the test stops beating: the supervisor
    // cannot have seen a beat sent before this instant change after it.
    let lastBeatSentAt = performance.now();
    const beating = setInterval(() => {
      lastBeatSentAt = performance.now();
      void fleet.beat(owner, ++seq).catch(() => undefined);
    }, HEARTBEAT_INTERVAL_MS);
    try {
      await waitFor('the supervisor to judge the worker alive', async () => (await fleet.liveness())[owner]?.liveness === 'alive');
      await t.stack.supervisor!.sweep();
      expect(server.runningSandboxIds().sort()).toEqual([mine.id, stranger.id].sort());
    } finally {
      clearInterval(beating); // kill -9: no goodbye, the beats just stop
    }
    const reaped = await waitFor(
      'the silent worker’s sandbox to be reaped',
      async () => (await new EventLog(conn).recent(100)).find((e) => e.type === 'sandbox.reaped' && e.sandboxId === mine.id),
      { timeoutMs: 20_000 },
    );
    // Not before the silence outlasted the lock: a partitioned worker's run may still be working until then.
    expect(performance.now() - lastBeatSentAt).toBeGreaterThan(LOCK_DURATION_MS);
    expect(reaped.data?.owner).toBe(owner);
    await waitFor('the sandbox to be gone on the server', () => !server.runningSandboxIds().includes(mine.id));
    await t.stack.supervisor!.sweep();
    expect(server.runningSandboxIds()).toEqual([stranger.id]);
    await creator.terminateById(stranger.id);
    await creator.close();
  }, 60_000);
});
