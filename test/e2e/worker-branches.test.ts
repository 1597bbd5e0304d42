import { Queue } from 'bullmq';
import { afterEach, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import type { LaneConfigInput } from '@lanes/contracts';
import { QUEUE_PREFIX } from '@lanes/queue';
import type { SandboxHandle, SandboxProvider } from '@lanes/sandbox';
import { FaultyProvider, createFaultyProvider } from '@lanes/sandbox/testing';
import { startTestStack, useRedis, waitFor } from '../harness/index.js';

const agent = [process.execPath, DEMO_AGENT];
const fastRespawn = { baseDelayMs: 20, maxDelayMs: 200, windowMs: 60_000 };

const alive = (pid: number | undefined) => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** Worker branches nobody met before: real Redis, real BullMQ, real local sandboxes behind a faulty provider. */
describe('worker branches end to end', () => {
  const f = useRedis();
  let faulty: FaultyProvider | undefined;

  const start = (lane: LaneConfigInput) => f.stack([lane], { wrap: (p) => (faulty = p instanceof FaultyProvider ? p : createFaultyProvider(p)) });

  afterEach(() => {
    faulty = undefined;
  });

  it('a provider outage in the middle of a card: the card waits as provider-outage, the breaker records it, the sandbox is kept, then the card runs to done', async () => {
    const { api } = await start({ name: 'outage', slots: 1, agent, respawn: fastRespawn, breaker: { failureThreshold: 5, windowMs: 60_000, openMs: 500 } });
    const before = await waitFor('a live sandbox', async () => {
      const s = (await api.lanes())[0]!.slots[0]?.sandbox;
      return s?.state === 'live' ? s.id : undefined;
    });
    // The agent's command comes back a bare exit 1 and the provider cannot be asked whether the sandbox lives.
    faulty!.setPlan({ bareExit1Every: 1, bareExit1Mode: 'live', pollErrors: true, targetCards: ['po-1'] });
    await api.request('POST', '/v1/cards', { id: 'po-1', lane: 'outage', title: 'meets an outage' });
    const blocked = await api.waitCard('po-1', 'blocked as provider-outage', (c) => c.history.some((h) => h.blockedReason === 'provider-outage'));
    faulty!.setPlan({});
    const entry = blocked.history.find((h) => h.blockedReason === 'provider-outage')!;
    expect(entry.verdict).toBe('provider-outage');
    expect(faulty!.stats.pollErrorsInjected).toBeGreaterThan(0);
    const lane = (await api.lanes())[0]!;
    expect(lane.breaker.failures).toBeGreaterThanOrEqual(1);
    // "Unknown" never destroys: the same sandbox serves on.
    expect(faulty!.stats.sandboxesKilled).toBe(0);
    const done = await api.waitCard('po-1', 'done', (c) => c.state === 'done');
    expect(done.sandboxId).toBe(before);
    expect(done.attempts).toBe(1);
  });

  it('a card already finished when a worker picks up its job: done completes the job, failed fails it, and neither runs again', async () => {
    const { api } = await start({ name: 'finished', slots: 1, agent, attempts: 1, respawn: fastRespawn });
    await api.request('POST', '/v1/cards', {
      cards: [
        { id: 'fin-done', lane: 'finished', title: 'fine' },
        { id: 'fin-failed', lane: 'finished', title: 'fails', metadata: { fail: 'on purpose' } },
      ],
    });
    const done = await api.waitCard('fin-done', 'done', (c) => c.state === 'done');
    const failed = await api.waitCard('fin-failed', 'failed', (c) => c.state === 'failed');
    const queue = new Queue('finished', { connection: f.conn, prefix: QUEUE_PREFIX });
    try {
      // A job for each id again, as a board speaking BullMQ (or a lost completion) would leave one.
      for (const id of ['fin-done', 'fin-failed']) {
        await (await queue.getJob(id))?.remove();
        await queue.add('finished', { id, lane: 'finished', title: 'again' }, { jobId: id, attempts: 1 });
      }
      const settled = async (id: string) =>
        waitFor(`job ${id} to settle`, async () => {
          const state = await (await queue.getJob(id))?.getState();
          return state === 'completed' || state === 'failed' ? state : undefined;
        });
      expect(await settled('fin-done')).toBe('completed');
      expect((await queue.getJob('fin-done'))!.returnvalue).toEqual(done.result);
      expect(await settled('fin-failed')).toBe('failed');
      expect((await queue.getJob('fin-failed'))!.failedReason).toContain('already failed');
    } finally {
      await queue.close();
    }
    expect(await api.card('fin-done')).toEqual(done);
    expect(await api.card('fin-failed')).toEqual(failed);
  });

  it('a job put on the lane straight through BullMQ, with no card record, gets one and runs to done once', async () => {
    const { api } = await start({ name: 'direct', slots: 1, agent, attempts: 1, respawn: fastRespawn });
    const queue = new Queue('direct', { connection: f.conn, prefix: QUEUE_PREFIX });
    try {
      await queue.add('direct', { id: 'direct-1', lane: 'direct', title: 'from a board speaking BullMQ' }, { jobId: 'direct-1', attempts: 1 });
      const card = await api.waitCard('direct-1', 'done', (c) => c.state === 'done');
      expect(card.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
      expect(await (await queue.getJob('direct-1'))!.getState()).toBe('completed');
    } finally {
      await queue.close();
    }
  });

  it('a cancel while the card waits for its sandbox: cancelled without running; the sandbox that comes later serves the next card', async () => {
    const { api } = await start({
      name: 'waiting',
      slots: 1,
      agent,
      respawn: { baseDelayMs: 300, maxDelayMs: 1_000, windowMs: 60_000 },
      breaker: { failureThreshold: 100, windowMs: 60_000, openMs: 60_000 },
      faults: { createFailures: 4 },
    });
    await api.request('POST', '/v1/cards', { id: 'wait-cancel', lane: 'waiting', title: 'never gets a sandbox in time' });
    await waitFor('the card to be taken while creates fail', async () => (await api.lanes())[0]!.counts.active === 1 && faulty!.stats.createFailuresInjected >= 1);
    expect((await api.card('wait-cancel')).state).toBe('queued');
    expect((await api.request('POST', '/v1/cards/wait-cancel/cancel')).status).toBe(202);
    const cancelled = await api.waitCard('wait-cancel', 'cancelled', (c) => c.state === 'cancelled');
    expect(cancelled.history.some((h) => h.state === 'running')).toBe(false);
    await api.request('POST', '/v1/cards', { id: 'wait-next', lane: 'waiting', title: 'after' });
    await api.waitCard('wait-next', 'done', (c) => c.state === 'done');
    expect(faulty!.stats.createFailuresInjected).toBe(4);
  });

  it('a new sandbox that fails its canary never goes live: the breaker hears of it, it is terminated, and a later one serves', async () => {
    const created: SandboxHandle[] = [];
    const recording = (p: SandboxProvider): SandboxProvider =>
      new Proxy(p, {
        get(target, prop) {
          if (prop === 'create') {
            return async (...args: Parameters<SandboxProvider['create']>) => {
              const handle = await target.create(...args);
              created.push(handle);
              return handle;
            };
          }
          const value: unknown = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const { api } = await f.stack(
      // Every command, the canary included, answers a bare exit 1 until the plan is cleared.
      [
        {
          name: 'canary',
          slots: 1,
          agent,
          respawn: { baseDelayMs: 200, maxDelayMs: 400, windowMs: 60_000 },
          breaker: { failureThreshold: 100, windowMs: 60_000, openMs: 60_000 },
          faults: { bareExit1Every: 1, bareExit1Mode: 'live' },
        },
      ],
      { wrap: (p) => recording((faulty = p as FaultyProvider)) },
    );
    await waitFor('two sandboxes to fail their canary', async () => (await api.lanes())[0]!.breaker.failures >= 2);
    expect((await api.lanes())[0]!.slots[0]?.sandbox?.state).not.toBe('live');
    const failedOnes = created.slice(0, 2);
    await waitFor('the failed sandboxes to be terminated', () => failedOnes.every((h) => !alive(h.pid)));
    faulty!.setPlan({});
    const live = await waitFor('a sandbox that passes', async () => {
      const s = (await api.lanes())[0]!.slots[0]?.sandbox;
      return s?.state === 'live' ? s.id : undefined;
    });
    expect(failedOnes.map((h) => h.id)).not.toContain(live);
    await api.request('POST', '/v1/cards', { id: 'canary-1', lane: 'canary', title: 'after' });
    expect((await api.waitCard('canary-1', 'done', (c) => c.state === 'done')).sandboxId).toBe(live);
  });

  it('a sandbox whose create finishes while the slot is stopping is terminated, not left running', async () => {
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const created: SandboxHandle[] = [];
    let creates = 0;
    const gated = (p: SandboxProvider): SandboxProvider =>
      new Proxy(p, {
        get(target, prop) {
          if (prop === 'create') {
            return async (...args: Parameters<SandboxProvider['create']>) => {
              creates += 1;
              await gate;
              const handle = await target.create(...args);
              created.push(handle);
              return handle;
            };
          }
          const value: unknown = Reflect.get(target, prop, target);
          return typeof value === 'function' ? value.bind(target) : value;
        },
      });
    const worker = await startTestStack(f.redis.url, [{ name: 'stopping', slots: 1, agent }], { wrap: gated, parts: { api: false, worker: true, supervisor: false } });
    await waitFor('the slot to be creating its sandbox', () => creates === 1);
    // With no API to close first, stop halts the slot before its first await; only then does the create finish.
    const stopping = worker.stop();
    release();
    await stopping;
    expect(created).toHaveLength(1);
    expect(alive(created[0]!.pid)).toBe(false);
  });
});
