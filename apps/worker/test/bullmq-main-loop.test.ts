import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { installedBullmqVersion } from '@lanes/queue';
import { MAIN_LOOP_BULLMQ_VERSION, mainLoopWakeFor, wakeMainLoop } from '../src/bullmq-main-loop.js';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** How long a raised worker is watched for a fetch it should not make without the wake. */
const NO_FETCH_WINDOW_MS = 1_000;

describe('the main-loop wake: BullMQ internals under a version gate', () => {
  it('is on under the BullMQ it was checked against, and off under any other', () => {
    expect(installedBullmqVersion).toBe(MAIN_LOOP_BULLMQ_VERSION);
    expect(mainLoopWakeFor()).toBe(true);
    for (const other of ['6.7.1', '6.8.0', '7.0.0', '5.81.5']) expect(mainLoopWakeFor(other), other).toBe(false);
  });

  describe('on a real BullMQ Worker of the installed version', () => {
    let redis: TestRedis;
    const connections: Redis[] = [];
    const connect = () => {
      const c = new Redis(redis.url, { maxRetriesPerRequest: null });
      connections.push(c);
      return c;
    };
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      for (const c of connections) c.disconnect();
      await redis?.stop();
    });

    it("has the private field the wake uses, a queue with add(), while its loop runs; another version's gate leaves it untouched", async () => {
      const worker = new Worker('field', async () => undefined, { connection: connect(), autorun: false });
      try {
        void worker.run();
        const loop = await waitFor('the main loop to start', () => (worker as unknown as { mainLoopQueue?: { add?: unknown } | null }).mainLoopQueue);
        expect(typeof loop.add).toBe('function');
        let added = 0;
        const add = loop.add as (p: Promise<undefined>) => void;
        loop.add = (p: Promise<undefined>) => {
          added++;
          add.call(loop, p);
        };
        expect(wakeMainLoop(worker, '7.0.0')).toBe(false);
        expect(added).toBe(0);
        expect(wakeMainLoop(worker)).toBe(true);
        expect(added).toBe(1);
      } finally {
        await worker.close();
      }
    });

    it('a raised concurrency alone fetches nothing while every slot runs; the wake makes the worker fetch for its new slot at once', async () => {
      const queue = new Queue('raise', { connection: connect() });
      const started: string[] = [];
      const release: Array<() => void> = [];
      const worker = new Worker(
        'raise',
        async (job) => {
          started.push(job.id!);
          await new Promise<void>((r) => release.push(r));
        },
        { connection: connect(), concurrency: 1 },
      );
      try {
        await queue.add('raise', {}, { jobId: 'a' });
        await waitFor('the first card to run', () => started.includes('a'));
        worker.concurrency = 2;
        await queue.add('raise', {}, { jobId: 'b' });
        // BullMQ's public setter wakes nothing: with its one slot busy, the loop does not fetch.
        // (If a new BullMQ's setter wakes the loop itself, this fails: use that, drop the wake.)
        await new Promise((r) => setTimeout(r, NO_FETCH_WINDOW_MS));
        expect(started).toEqual(['a']);
        expect(wakeMainLoop(worker)).toBe(true);
        await waitFor('the second card to run beside the first', () => started.includes('b'), { timeoutMs: 5_000 });
        expect(release).toHaveLength(2);
      } finally {
        for (const r of release) r();
        await worker.close();
        await queue.close();
      }
    });
  });
});
