import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { QUEUE_PREFIX, createRedis } from '@lanes/queue';
import { RECONNECT_STASH_IOREDIS_VERSION, installedIoredisVersion, settlesReconnectStash } from '../src/connection.js';
import { startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** Long enough that a close waiting on it would be seen hanging; a working close takes milliseconds. */
const CLOSE_DEADLINE_MS = 5_000;
/** Redis restarts and the connection's next attempt comes within ioredis's retry cap (2 s). */
const REDIS_BACK_CLOSE_DEADLINE_MS = 15_000;

function settlesWithin<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  return Promise.race([promise, late]).finally(() => clearTimeout(timer));
}

describe('createRedis: closing while Redis is unreachable', () => {
  let server: TestRedis | undefined;
  const opened: Redis[] = [];

  afterEach(async () => {
    for (const r of opened.splice(0)) r.disconnect();
    await server?.start();
    await server?.stop();
    server = undefined;
  });

  it('a connection waiting to reconnect ends when disconnected, and its queued commands fail', async () => {
    server = await startRedis();
    // A slow retry keeps the connection parked between attempts, where ioredis 5 never ended it.
    const redis = createRedis(server.url, { retryStrategy: () => 60_000 });
    opened.push(redis);
    redis.on('error', () => undefined);
    await redis.ping();
    await server.kill();
    await waitFor('the connection to wait for its next attempt', () => redis.status === 'reconnecting');
    const queued = redis.get('anything');
    const ended = new Promise<void>((resolve) => redis.once('end', () => resolve()));

    redis.disconnect();

    await settlesWithin("the connection's end", ended, CLOSE_DEADLINE_MS);
    expect(redis.status).toBe('end');
    await expect(settlesWithin('the queued command', queued, CLOSE_DEADLINE_MS)).rejects.toThrow('Connection is closed');
  });

  it("a BullMQ Worker's blocking connection ends when the worker closes during an outage, and the close completes once Redis is back", async () => {
    server = await startRedis();
    const redis = createRedis(server.url);
    opened.push(redis);
    redis.on('error', () => undefined);
    const copies: Redis[] = [];
    const duplicate = redis.duplicate.bind(redis);
    redis.duplicate = (override) => {
      const copy = duplicate(override);
      copies.push(copy);
      opened.push(copy);
      return copy;
    };
    const worker = new Worker('outage', async () => undefined, { connection: redis, prefix: QUEUE_PREFIX });
    worker.on('error', () => undefined);
    await worker.waitUntilReady();
    await waitFor("the worker's blocking connection", () => copies.some((c) => c.status === 'ready'));

    await server.kill();
    await waitFor('every connection of the worker to wait between attempts', () => [redis, ...copies].every((c) => c.status === 'reconnecting'));

    const closing = worker.close();
    // What the fix guarantees: the copy BullMQ made for its blocking reads ends, outage or not
    // (before, it stayed 'reconnecting' for good and close() never returned).
    await waitFor("the worker's blocking connection to end", () => copies.every((c) => c.status === 'end'), { timeoutMs: CLOSE_DEADLINE_MS });
    // The worker's loop may be waiting on a command of the connection it was given (the app's,
    // which waits for Redis by design): the close then completes when Redis is back.
    await server.start();
    await settlesWithin('Worker.close() once Redis is back', closing, REDIS_BACK_CLOSE_DEADLINE_MS);
    await server.kill(); // as the other test leaves it: afterEach starts it to stop it
  });

  it('a command in flight when its socket dropped fails when the connection ends after a reconnect that never became ready', async () => {
    server = await startRedis();
    // Attempts far enough apart that the server is stopped before the one that reaches it.
    const redis = createRedis(server.url, { retryStrategy: () => 300, disconnectTimeout: 100 });
    opened.push(redis);
    redis.on('error', () => undefined);
    const id = await redis.client('ID');
    const inFlight = redis.blpop('lanes-test-never-pushed', 0);
    const admin = createRedis(server.url);
    opened.push(admin);
    // Redis drops the socket with the BLPOP on it; ioredis keeps the BLPOP to send again once ready.
    await admin.client('KILL', 'ID', String(id));
    // The next attempt connects (the kernel accepts for a stopped server) and never becomes ready.
    const pid = server.pid!;
    process.kill(pid, 'SIGSTOP');
    try {
      await waitFor('the connection to reach the stopped server', () => redis.status === 'connect', { timeoutMs: CLOSE_DEADLINE_MS });
      redis.disconnect();
      // ioredis 5.11.1 reset its command queue at that connect and ends without the BLPOP: a stop
      // awaiting it (the callback dispatcher's read) hung for good, even once Redis was back.
      await expect(settlesWithin('the command in flight', inFlight, CLOSE_DEADLINE_MS)).rejects.toThrow('Connection is closed');
      expect(redis.status).toBe('end');
    } finally {
      process.kill(pid, 'SIGCONT');
      await server.kill(); // as the other tests leave it: afterEach starts it to stop it
    }
  });

  it('fails the stashed commands only under the ioredis whose reconnect stash it was read against', () => {
    // A new ioredis: re-read how it stashes and resends a dropped socket's commands
    // (event_handler.js: closeHandler, connectHandler, readyHandler) and run the test above before
    // moving the version in connection.ts.
    expect(installedIoredisVersion).toBe(RECONNECT_STASH_IOREDIS_VERSION);
    expect(settlesReconnectStash()).toBe(true);
    expect(settlesReconnectStash('5.12.0')).toBe(false);
  });
});
