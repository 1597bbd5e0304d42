import { existsSync, mkdtempSync, rmSync, statSync } from 'node:fs';
import { createServer, type Server, type Socket } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { parseEnv } from '@lanes/contracts';
import { RedisUnavailableError, pingRedis, resolveRedis, type ResolvedRedis } from '../src/index.js';
import { freePort, startRedis, waitFor, type TestRedis } from '../../../test/harness/index.js';

/** Whether a pid is still a running process (a zombie counts as gone once reaped by its parent). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The redis-server's own pid, as it reports it. */
async function serverPid(url: string): Promise<number> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await client.connect();
    const info = await client.info('server');
    return Number(/process_id:(\d+)/.exec(info)![1]);
  } finally {
    client.disconnect();
  }
}

async function ping(url: string): Promise<string> {
  const client = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: true });
  try {
    await client.connect();
    return await client.ping();
  } finally {
    client.disconnect();
  }
}

/** A TCP listener that is not Redis; `reply` decides what each connection gets. */
async function listener(reply: (socket: Socket) => void): Promise<{ port: number; close: () => Promise<void> }> {
  const sockets = new Set<Socket>();
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('error', () => undefined);
    reply(socket);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as { port: number }).port;
  return {
    port,
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('resolveRedis', () => {
  let dir: string;
  const cleanups: Array<() => Promise<unknown>> = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-redis-resolve-'));
  });
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });
  afterAll(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const track = (r: ResolvedRedis) => {
    cleanups.push(() => r.stop());
    return r;
  };

  it('uses REDIS_URL as is, probing and starting nothing', async () => {
    const url = 'redis://:secret@redis.example.invalid:6380/2';
    const dataDir = join(dir, 'unused');
    const r = await resolveRedis(parseEnv({ REDIS_URL: url }).redis, dataDir, { localPort: await freePort(), redisServer: 'no-such-redis-server-binary' });
    expect(r.url).toBe(url);
    expect(r.source).toBe('REDIS_URL');
    await r.stop();
  });

  it.each([
    ['REDIS_SENTINELS', { REDIS_SENTINELS: 's1.invalid:26379,s2.invalid', REDIS_SENTINEL_NAME: 'lanes', REDIS_PASSWORD: 'p@ss', REDIS_SENTINEL_PASSWORD: 'sp' }],
    ['REDIS_URL', { REDIS_URL: 'redis+sentinel://:p%40ss@s1.invalid:26379,s2.invalid/lanes?sentinelPassword=sp' }],
  ])('uses Sentinel from %s as the URL form, probing and starting nothing even with a Redis on the local port', async (_from, env) => {
    const local = await startRedis();
    cleanups.push(() => local.stop());
    const dataDir = join(dir, 'never-created-sentinel');
    const r = await resolveRedis(parseEnv(env).redis, dataDir, { localPort: local.port, redisServer: 'no-such-redis-server-binary' });
    expect(r.source).toBe('Sentinel');
    expect(r.url).toBe('redis+sentinel://:p%40ss@s1.invalid:26379,s2.invalid:26379/lanes?sentinelPassword=sp');
    expect(existsSync(dataDir)).toBe(false);
    await r.stop();
  });

  describe('with a Redis answering on the local port', () => {
    let local: TestRedis;
    beforeAll(async () => {
      local = await startRedis();
    });
    afterAll(async () => {
      await local?.stop();
    });

    it('connects to it and starts nothing', async () => {
      const dataDir = join(dir, 'never-created');
      const r = track(await resolveRedis(undefined, dataDir, { localPort: local.port, redisServer: 'no-such-redis-server-binary' }));
      expect(r.url).toBe(`redis://127.0.0.1:${local.port}`);
      expect(r.source).toBe('local 6379');
      await r.stop();
      // stop() of a Redis we only connected to leaves it running.
      expect(await ping(local.url)).toBe('PONG');
      expect(await pingRedis('127.0.0.1', local.port)).toBe(true);
    });

    it('an empty REDIS_URL counts as unset', async () => {
      const r = track(await resolveRedis(parseEnv({ REDIS_URL: '' }).redis, join(dir, 'x'), { localPort: local.port }));
      expect(r.source).toBe('local 6379');
    });
  });

  it('with nothing on the local port, starts its own redis-server on a free port with its data in dataDir, and stop() ends it', async () => {
    const localPort = await freePort();
    const dataDir = join(dir, 'embedded');
    const r = track(await resolveRedis(undefined, dataDir, { localPort }));
    expect(r.source).toBe('embedded redis-server');
    const port = Number(new URL(r.url).port);
    expect(new URL(r.url).hostname).toBe('127.0.0.1');
    expect(port).not.toBe(localPort);
    expect(await ping(r.url)).toBe('PONG');
    // Agents share the host's loopback: without the password the server refuses, and only the
    // worker's user can read the data directory or the config file that holds it.
    // (A PING without AUTH is answered -NOAUTH: not a PONG, yet the server is up.)
    expect(await pingRedis('127.0.0.1', port)).toBe(false);
    expect(await pingRedis('127.0.0.1', port, 500, { authRequired: true })).toBe(true);
    expect(statSync(dataDir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dataDir, 'lanes-redis.conf')).mode & 0o777).toBe(0o600);

    const client = new Redis(r.url, { maxRetriesPerRequest: 1 });
    try {
      expect(await client.config('GET', 'dir')).toEqual(['dir', dataDir]);
      expect(await client.config('GET', 'appendonly')).toEqual(['appendonly', 'yes']);
      expect(await client.config('GET', 'maxmemory-policy')).toEqual(['maxmemory-policy', 'noeviction']);
    } finally {
      client.disconnect();
    }

    const pid = await serverPid(r.url);
    expect(alive(pid)).toBe(true);
    await r.stop();
    expect(alive(pid)).toBe(false);
    expect(await pingRedis('127.0.0.1', port)).toBe(false);
    await r.stop(); // twice is fine
  });

  it('stop() returns when the embedded redis-server was already killed by a signal', async () => {
    const r = track(await resolveRedis(undefined, join(dir, 'killed'), { localPort: await freePort() }));
    const pid = await serverPid(r.url);
    process.kill(pid, 'SIGKILL');
    await waitFor('redis-server gone', () => !alive(pid), { timeoutMs: 5_000 });
    await expect(Promise.race([r.stop().then(() => 'stopped'), new Promise((resolve) => setTimeout(resolve, 5_000, 'hung'))])).resolves.toBe('stopped');
  });

  it('with no redis-server binary, fails with RedisUnavailableError saying how to get one', async () => {
    const error = await resolveRedis(undefined, join(dir, 'missing'), { localPort: await freePort(), redisServer: 'lanes-no-such-redis-server' }).then(
      () => undefined,
      (err: unknown) => err,
    );
    expect(error).toBeInstanceOf(RedisUnavailableError);
    const message = (error as RedisUnavailableError).message;
    expect((error as RedisUnavailableError).code).toBe('REDIS_UNAVAILABLE');
    expect(message).toContain('apt install redis-server');
    expect(message).toContain('brew install redis');
    expect(message).toContain('docker compose up -d redis');
    expect(message).toContain('REDIS_URL');
  });

  it('something on the local port that is not Redis and hangs up is treated as no Redis', async () => {
    const hangUp = await listener((socket) => socket.end());
    cleanups.push(() => hangUp.close());
    const r = track(await resolveRedis(undefined, join(dir, 'behind-hangup'), { localPort: hangUp.port }));
    expect(r.source).toBe('embedded redis-server');
    expect(await ping(r.url)).toBe('PONG');
  });
});

describe('pingRedis', () => {
  const closers: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const c of closers.splice(0)) await c();
  });

  it.each([
    { name: 'answers HTTP', reply: (s: Socket) => s.end('HTTP/1.1 400 Bad Request\r\n\r\n') },
    { name: 'answers a Redis error', reply: (s: Socket) => s.end('-ERR unknown\r\n') },
    { name: 'hangs up at once', reply: (s: Socket) => s.end() },
    { name: 'says nothing', reply: () => undefined },
  ])('is false against a TCP listener that $name', async ({ reply }) => {
    const l = await listener(reply);
    closers.push(l.close);
    expect(await pingRedis('127.0.0.1', l.port, 300)).toBe(false);
  });

  it('is false when nothing listens, and true against a real Redis', async () => {
    expect(await pingRedis('127.0.0.1', await freePort())).toBe(false);
    const redis = await startRedis();
    closers.push(() => redis.stop());
    expect(await pingRedis('127.0.0.1', redis.port)).toBe(true);
  });
});
