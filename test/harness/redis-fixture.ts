import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll } from 'vitest';
import type { LaneConfigInput } from '@lanes/contracts';
import { startRedis, type TestRedis } from './redis-server.js';
import { startTestStack, type TestStack } from './stack.js';

export interface RedisFixture {
  /** The describe block's own redis-server, started before its first test and stopped after its last. */
  readonly redis: TestRedis;
  /** A plain connection to it, for reading what the stack wrote. */
  readonly conn: Redis;
  /** A stack on that Redis, stopped after the test that started it (newest first). */
  stack(lanes: LaneConfigInput[], options?: Parameters<typeof startTestStack>[2]): Promise<TestStack>;
}

/** Hooks the calling describe block to one redis-server and stops each test's stacks after it. */
export function useRedis(): RedisFixture {
  let redis: TestRedis | undefined;
  let conn: Redis | undefined;
  const stacks: TestStack[] = [];
  const started = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is not started: use the fixture inside a test`);
    return value;
  };
  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    // A test may kill its Redis on purpose; this connection waits for it like the rest.
    conn.on('error', () => undefined);
  });
  afterEach(async () => {
    for (const s of stacks.splice(0).reverse()) await s.stop();
  });
  afterAll(async () => {
    conn?.disconnect();
    await redis?.stop();
  });
  return {
    get redis() {
      return started(redis, 'the redis-server');
    },
    get conn() {
      return started(conn, 'the connection');
    },
    async stack(lanes, options) {
      const t = await startTestStack(started(redis, 'the redis-server').url, lanes, options);
      stacks.push(t);
      return t;
    },
  };
}
