import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { QUEUE_PREFIX, appendJobLog, createRedis } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

describe('appendJobLog on real Redis and BullMQ', () => {
  let server: TestRedis;
  let redis: Redis;
  let queue: Queue;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    queue = new Queue('logs', { connection: redis, prefix: QUEUE_PREFIX });
  });
  afterAll(async () => {
    await queue?.close();
    redis?.disconnect();
    await server?.stop();
  });

  it('appends a batch as separate entries of the BullMQ job log, in order, after what job.log wrote', async () => {
    const job = await queue.add('logs', {}, { jobId: 'j1' });
    await job.log('first');
    expect(await appendJobLog(redis, 'logs', 'j1', ['second', 'third'])).toBe(3);
    expect(await queue.getJobLogs('j1')).toEqual({ logs: ['first', 'second', 'third'], count: 3 });
  });

  it('keeps only the last keepLogs entries, and writes nothing for a job that is gone', async () => {
    await queue.add('logs', {}, { jobId: 'j2' });
    expect(await appendJobLog(redis, 'logs', 'j2', ['a', 'b', 'c', 'd'], 2)).toBe(2);
    expect((await queue.getJobLogs('j2')).logs).toEqual(['c', 'd']);
    expect(await appendJobLog(redis, 'logs', 'gone', ['x'])).toBe(-1);
    expect(await redis.exists(`${QUEUE_PREFIX}:logs:gone:logs`)).toBe(0);
  });
});
