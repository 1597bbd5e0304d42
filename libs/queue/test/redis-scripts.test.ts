import type { Redis, Result } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRedis } from '@lanes/queue';
import { defineScriptsOnce } from '../src/redis-scripts.js';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesTestEcho(...args: Array<string | number>): Result<unknown, Context>;
    lanesTestKeys(...args: Array<string | number>): Result<unknown, Context>;
  }
}

const TABLE = {
  lanesTestEcho: { numberOfKeys: 1, lua: 'return {KEYS[1], ARGV[1]}' },
  lanesTestKeys: { lua: 'return #KEYS' },
};

/** Counts the definitions made on a real connection, so a repeat shows. */
function countDefinitions(redis: Redis): string[] {
  const names: string[] = [];
  const define = redis.defineCommand.bind(redis);
  redis.defineCommand = (name, spec) => {
    names.push(name);
    define(name, spec);
  };
  return names;
}

describe('defineScriptsOnce on real Redis', () => {
  let server: TestRedis;
  let first: Redis;
  let second: Redis;

  beforeAll(async () => {
    server = await startRedis();
    first = createRedis(server.url);
    second = createRedis(server.url);
  });
  afterAll(async () => {
    first?.disconnect();
    second?.disconnect();
    await server?.stop();
  });

  it('defines every command of a table once per connection, with or without a fixed key count', async () => {
    const defined = countDefinitions(first);
    defineScriptsOnce(first, TABLE);
    defineScriptsOnce(first, TABLE);
    expect(defined).toEqual(['lanesTestEcho', 'lanesTestKeys']);
    expect(await first.lanesTestEcho('k', 'v')).toEqual(['k', 'v']);
    expect(await first.lanesTestKeys(3, 'a', 'b', 'c')).toBe(3);
  });

  it('defines the table again on another connection, and another table on the same one', async () => {
    const defined = countDefinitions(second);
    defineScriptsOnce(second, TABLE);
    expect(await second.lanesTestEcho('k2', 'v2')).toEqual(['k2', 'v2']);
    const other = { lanesTestKeys: { lua: 'return #KEYS + 100' } };
    defineScriptsOnce(second, other);
    expect(defined).toEqual(['lanesTestEcho', 'lanesTestKeys', 'lanesTestKeys']);
    expect(await second.lanesTestKeys(1, 'a')).toBe(101);
  });
});
