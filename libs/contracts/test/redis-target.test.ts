import { describe, expect, it } from 'vitest';
import { ConfigError, formatRedisTarget, parseEnv, parseLanesConfig, parseRedisUrl, redactRedisUrl, type RedisTarget } from '@lanes/contracts';

const sentinel = (over: Partial<Extract<RedisTarget, { kind: 'sentinel' }>> = {}): RedisTarget => ({
  kind: 'sentinel',
  sentinels: [
    { host: 's1', port: 26379 },
    { host: 's2', port: 26380 },
  ],
  name: 'lanes',
  tls: false,
  db: 0,
  ...over,
});

/** The environment's error, for asserting what it names. */
function envError(env: Record<string, string>): ConfigError {
  try {
    parseEnv(env);
  } catch (err) {
    if (err instanceof ConfigError) return err;
    throw err;
  }
  throw new Error(`parseEnv accepted ${JSON.stringify(env)}`);
}

describe('parseRedisUrl', () => {
  it.each<[string, RedisTarget]>([
    ['redis://127.0.0.1:6379', { kind: 'url', url: 'redis://127.0.0.1:6379' }],
    ['rediss://u:p@redis.example:6380/2', { kind: 'url', url: 'rediss://u:p@redis.example:6380/2' }],
    ['redis+sentinel://s1,s2:26380/lanes', sentinel()],
    ['redis+sentinel://s1:26379,s2:26380/lanes?db=3', sentinel({ db: 3 })],
    ['rediss+sentinel://s1,s2:26380/lanes', sentinel({ tls: true })],
    ['redis+sentinel://:pw@s1,s2:26380/lanes', sentinel({ password: 'pw' })],
    ['redis+sentinel://lanes-app:p%40ss%2Fw+rd@s1,s2:26380/lanes', sentinel({ username: 'lanes-app', password: 'p@ss/w+rd' })],
    ['redis+sentinel://lanes-app@s1,s2:26380/lanes', sentinel({ username: 'lanes-app' })],
    ['redis+sentinel://s1,s2:26380/lanes?sentinelUsername=watcher&sentinelPassword=s%26p', sentinel({ sentinelUsername: 'watcher', sentinelPassword: 's&p' })],
    [
      'redis+sentinel://[::1]:26379,10.0.0.2/lanes',
      sentinel({
        sentinels: [
          { host: '::1', port: 26379 },
          { host: '10.0.0.2', port: 26379 },
        ],
      }),
    ],
  ])('%s', (url, target) => {
    expect(parseRedisUrl(url)).toEqual({ ok: true, target });
  });

  it.each([
    ['http://redis:6379', '', /must be a redis:\/\/, rediss:\/\/, redis\+sentinel:\/\/ or rediss\+sentinel:\/\/ URL/],
    ['redis+sentinel://s1:26379', 'name', /names no Sentinel group/],
    ['redis+sentinel:///lanes', 'sentinels', /names no sentinel/],
    ['redis+sentinel://s1:0/lanes', 'sentinels.0', /"s1:0" is not host\[:port\]/],
    ['redis+sentinel://s1,s2:abc/lanes', 'sentinels.1', /"s2:abc" is not host\[:port\]/],
    ['redis+sentinel://s1/lanes?db=x', 'query.db', /database number/],
    ['redis+sentinel://s1/lanes?db=1&db=2', 'query.db', /twice/],
    ['redis+sentinel://s1/lanes?sentinelPasword=x', 'query', /sentinelPasword/],
    ['redis+sentinel://s1/lanes?sentinelPassword=', 'query.sentinelPassword', /empty/],
    ['redis+sentinel://:%E0%A4%A@s1/lanes', 'password', /percent-encoding/],
    ['redis+sentinel://s1/a/b', 'name', /one word/],
    ['redis+sentinel://s1/lanes#frag', '', /is not redis\+sentinel:\/\//],
  ])('refuses %s, naming %s', (url, path, message) => {
    const parsed = parseRedisUrl(url);
    expect(parsed.ok).toBe(false);
    if (parsed.ok) return;
    expect(parsed.issues.map((i) => i.path)).toContain(path);
    expect(parsed.issues.find((i) => i.path === path)!.message).toMatch(message);
  });

  it('never echoes a password it refuses', () => {
    const parsed = parseRedisUrl('redis+sentinel://:hunter2%ZZ@s1/lanes?sentinelPassword=hunter3%ZZ');
    expect(parsed.ok).toBe(false);
    expect(JSON.stringify(parsed)).not.toMatch(/hunter/);
  });
});

describe('formatRedisTarget and redactRedisUrl', () => {
  it.each([
    'redis+sentinel://s1:26379,s2:26380/lanes',
    'rediss+sentinel://lanes-app:p%40ss%2Fw%2Brd@s1:26379,[::1]:26380/lanes?db=3&sentinelUsername=watcher&sentinelPassword=s%26p',
    'redis+sentinel://lanes-app@s1:26379/lanes',
  ])('reads %s back as the same target', (url) => {
    const parsed = parseRedisUrl(url);
    if (!parsed.ok) throw new Error(JSON.stringify(parsed.issues));
    expect(formatRedisTarget(parsed.target)).toBe(url);
    expect(parseRedisUrl(formatRedisTarget(parsed.target))).toEqual(parsed);
  });

  it.each([
    ['redis://:hunter2@127.0.0.1:6379', 'redis://:***@127.0.0.1:6379'],
    ['rediss://app:hunter2@redis.example:6380/1', 'rediss://app:***@redis.example:6380/1'],
    ['redis://127.0.0.1:6379', 'redis://127.0.0.1:6379'],
    ['redis+sentinel://app:hunter2@s1,s2:26380/lanes?sentinelPassword=hunter3&db=2', 'redis+sentinel://app:***@s1:26379,s2:26380/lanes?db=2&sentinelPassword=***'],
    ['rediss+sentinel://:hunter2@s1/lanes', 'rediss+sentinel://:***@s1:26379/lanes'],
    ['redis+sentinel://s1/lanes', 'redis+sentinel://s1:26379/lanes'],
    ['redis+sentinel://:hunter2@s1/lanes?sentinelPasword=hunter3', 'redis+sentinel://(unparseable)'],
    ['hunter2', 'redis://(unparseable)'],
  ])('%s is logged as %s', (url, logged) => {
    expect(redactRedisUrl(url)).toBe(logged);
    expect(redactRedisUrl(url)).not.toMatch(/hunter/);
  });
});

describe('parseEnv: REDIS_URL or REDIS_SENTINELS, as one target', () => {
  it('neither set: no target (lanes up then looks for a local Redis)', () => {
    expect(parseEnv({}).redis).toBeUndefined();
    expect(parseEnv({ REDIS_URL: '', REDIS_SENTINELS: '' }).redis).toBeUndefined();
  });

  it('REDIS_URL of either form', () => {
    expect(parseEnv({ REDIS_URL: 'redis://r:6379' }).redis).toEqual({ kind: 'url', url: 'redis://r:6379' });
    expect(parseEnv({ REDIS_URL: 'redis+sentinel://s1,s2:26380/lanes' }).redis).toEqual(sentinel());
  });

  it('REDIS_SENTINELS with its companions is the same target as the URL form', () => {
    const fromEnv = parseEnv({
      REDIS_SENTINELS: 's1, s2:26380',
      REDIS_SENTINEL_NAME: 'lanes',
      REDIS_USERNAME: 'app',
      REDIS_PASSWORD: 'p@ss',
      REDIS_SENTINEL_USERNAME: 'watcher',
      REDIS_SENTINEL_PASSWORD: 'sp',
      REDIS_TLS: '1',
      REDIS_DB: '4',
    }).redis;
    const fromUrl = parseEnv({ REDIS_URL: 'rediss+sentinel://app:p%40ss@s1,s2:26380/lanes?db=4&sentinelUsername=watcher&sentinelPassword=sp' }).redis;
    expect(fromEnv).toEqual(fromUrl);
    expect(fromEnv).toEqual(sentinel({ tls: true, db: 4, username: 'app', password: 'p@ss', sentinelUsername: 'watcher', sentinelPassword: 'sp' }));
  });

  it.each<[Record<string, string>, string, RegExp]>([
    [{ REDIS_URL: 'redis+sentinel://s1/lanes?sentinelPasword=x' }, 'REDIS_URL.query', /sentinelPasword/],
    [{ REDIS_URL: 'redis+sentinel://s1:99999/lanes' }, 'REDIS_URL.sentinels.0', /not host\[:port\]/],
    [{ REDIS_URL: 'memcached://x' }, 'REDIS_URL', /must be a redis:\/\//],
    [{ REDIS_SENTINELS: 's1' }, 'REDIS_SENTINEL_NAME', /required with REDIS_SENTINELS/],
    [{ REDIS_SENTINEL_NAME: 'lanes' }, 'REDIS_SENTINEL_NAME', /without REDIS_SENTINELS/],
    [{ REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'lanes', REDIS_URL: 'redis://r' }, 'REDIS_SENTINELS', /set one of them/],
    [{ REDIS_SENTINELS: 's1,s2:x', REDIS_SENTINEL_NAME: 'lanes' }, 'REDIS_SENTINELS', /"s2:x" is not host\[:port\]/],
    [{ REDIS_SENTINELS: ',', REDIS_SENTINEL_NAME: 'lanes' }, 'REDIS_SENTINELS', /names no sentinel/],
    [{ REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'lanes', REDIS_DB: 'two' }, 'REDIS_DB', /database number/],
    [{ REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'my group' }, 'REDIS_SENTINEL_NAME', /one word/],
    [{ REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'lanes', REDIS_TLS: 'yes' }, 'REDIS_TLS', /./],
    [{ REDIS_URL: 'redis://r', REDIS_PASSWORD: 'x' }, 'REDIS_PASSWORD', /only with REDIS_SENTINELS/],
    [{ REDIS_URL: 'redis://r', REDIS_SENTINEL_PASSWORD: 'x' }, 'REDIS_SENTINEL_PASSWORD', /only with REDIS_SENTINELS/],
    [{ REDIS_TLS: '1' }, 'REDIS_TLS', /only with REDIS_SENTINELS/],
  ])('%j is refused, naming %s', (env, path, message) => {
    const err = envError(env);
    expect(err.issues.map((i) => i.path)).toContain(path);
    expect(err.issues.find((i) => i.path === path)!.message).toMatch(message);
    expect(err.message).toContain(path);
  });

  it('an error never carries a password', () => {
    const err = envError({ REDIS_SENTINELS: 's1', REDIS_SENTINEL_NAME: 'lanes', REDIS_PASSWORD: 'hunter2', REDIS_DB: 'x' });
    expect(err.message).not.toMatch(/hunter2/);
  });
});

describe("the Redis variables are lanes' own", () => {
  it.each([
    'REDIS_URL',
    'REDIS_SENTINELS',
    'REDIS_SENTINEL_NAME',
    'REDIS_USERNAME',
    'REDIS_PASSWORD',
    'REDIS_SENTINEL_USERNAME',
    'REDIS_SENTINEL_PASSWORD',
    'REDIS_TLS',
    'REDIS_DB',
  ])('a local lane may not map %s into its agents', (name) => {
    expect(() => parseLanesConfig({ lanes: [{ name: 'l', agent: ['true'], secrets: [name] }] })).toThrow(/lanes\.0\.secrets\.0: .*credential of lanes itself/);
  });
});
