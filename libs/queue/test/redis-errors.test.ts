import { Redis, ReplyError } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisFullError } from '@lanes/contracts';
import { asRedisFullError, isGroupExistsError } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const reply = (message: string, extra: Record<string, unknown> = {}) => Object.assign(new ReplyError(message) as Error, extra);
const OOM = "OOM command not allowed when used memory > 'maxmemory'.";

describe('asRedisFullError: the one reading of a Redis error as "full"', () => {
  it.each<[string, unknown, boolean]>([
    ['an OOM reply to a command', reply(OOM), true],
    ['an OOM reply from inside a script (Redis keeps the code)', reply(`${OOM} script: 34710d20d43f, on @user_script:1.`), true],
    ['a MULTI discarded for an OOM refusal while queuing', reply('EXECABORT Transaction discarded because of previous errors.', { previousErrors: [reply(OOM)] }), true],
    ['a MULTI discarded for another reason', reply('EXECABORT Transaction discarded because of previous errors.', { previousErrors: [reply('ERR unknown command')] }), false],
    ['the typed error itself', new RedisFullError(), true],
    ['another reply (ERR)', reply('ERR wrong number of arguments'), false],
    ['a reply that only mentions OOM later', reply('ERR Error running script: OOM'), false],
    ['a reply code that merely starts with OOM', reply('OOMKILLED something'), false],
    ['not a Redis reply, though its message says OOM', new Error(OOM), false],
    ['a transport error', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), false],
    ['not an error at all', 'OOM', false],
    ['undefined', undefined, false],
  ])('%s → full: %s', (_name, err, full) => {
    const out = asRedisFullError(err);
    expect(out !== undefined).toBe(full);
    if (out) {
      expect(out).toBeInstanceOf(RedisFullError);
      expect(out.code).toBe('REDIS_FULL');
      expect(out.retry).toBe('transient');
    }
  });
});

describe('isGroupExistsError: XGROUP CREATE refused because the group exists', () => {
  it.each<[string, unknown, boolean]>([
    ['the BUSYGROUP reply', reply('BUSYGROUP Consumer Group name already exists'), true],
    ['another reply to XGROUP', reply('ERR The XGROUP subcommand requires the key to exist.'), false],
    ['a reply that mentions BUSYGROUP later', reply('ERR Error running script: BUSYGROUP'), false],
    ['not a Redis reply, though its message says BUSYGROUP', new Error('BUSYGROUP Consumer Group name already exists'), false],
    ['a transport error', Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:6379'), { code: 'ECONNREFUSED' }), false],
    ['not an error at all', 'BUSYGROUP', false],
  ])('%s → exists: %s', (_name, err, exists) => {
    expect(isGroupExistsError(err)).toBe(exists);
  });
});

describe('isGroupExistsError against a real redis-server', () => {
  let server: TestRedis;
  let redis: Redis;
  beforeAll(async () => {
    server = await startRedis();
    redis = new Redis(server.url);
  });
  afterAll(async () => {
    redis.disconnect();
    await server.stop();
  });

  it("reads the server's own answer to a second XGROUP CREATE as the group existing, and a missing stream as not", async () => {
    await redis.xgroup('CREATE', 'errs-stream', 'g', '0', 'MKSTREAM');
    const again = await redis.xgroup('CREATE', 'errs-stream', 'g', '0', 'MKSTREAM').catch((err: unknown) => err);
    expect(isGroupExistsError(again)).toBe(true);
    const noStream = await redis.xgroup('CREATE', 'errs-missing', 'g', '0').catch((err: unknown) => err);
    expect(noStream).toBeInstanceOf(Error);
    expect(isGroupExistsError(noStream)).toBe(false);
  });
});
