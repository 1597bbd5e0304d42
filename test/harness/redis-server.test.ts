import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { redisIdentity, startRedis, type TestRedis } from './redis-server.js';
import { waitFor } from './wait-for.js';

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The harness Redis must be its own: the child it started, answering as itself, on start and on restart. */
describe('harness: startRedis', () => {
  const started: TestRedis[] = [];
  afterEach(async () => {
    for (const r of started.splice(0).reverse()) await r.stop().catch(() => undefined);
  });
  const track = (r: TestRedis) => {
    started.push(r);
    return r;
  };

  it('is ready only as its own child: alive, and answering INFO with its pid; a restart checks the same', async () => {
    const redis = track(await startRedis({ appendonly: true }));
    const first = redis.pid!;
    expect(alive(first)).toBe(true);
    expect(await redisIdentity(redis.port)).toMatchObject({ pid: first, port: redis.port });

    await redis.kill();
    expect(alive(first)).toBe(false);
    await redis.start();
    expect(redis.pid).not.toBe(first);
    expect(await redisIdentity(redis.port)).toMatchObject({ pid: redis.pid, port: redis.port });
  });

  it('fails to start on a port another redis-server holds, instead of sharing it, and leaves that one alone', async () => {
    const other = track(await startRedis());
    await expect(startRedis({ port: other.port })).rejects.toThrow(/exited|another redis-server/);
    expect(alive(other.pid!)).toBe(true);
    expect(await redisIdentity(other.port)).toMatchObject({ pid: other.pid });
  });

  it('a restart on its port, taken meanwhile by another redis-server, fails', async () => {
    const redis = track(await startRedis());
    await redis.kill();
    const squatter = track(await startRedis({ port: redis.port }));
    await expect(redis.start()).rejects.toThrow(/exited|another redis-server/);
    expect(await redisIdentity(redis.port)).toMatchObject({ pid: squatter.pid });
  });

  it('a child that exits by itself is an error at stop, not ignored', async () => {
    const redis = await startRedis();
    const pid = redis.pid!;
    process.kill(pid, 'SIGKILL');
    await waitFor('the child to be gone', () => !alive(pid));
    await expect(redis.stop()).rejects.toThrow(/exited with SIGKILL/);
  });

  it('a harness killed with -9 takes its redis-server with it', async () => {
    // A process of its own that starts a Redis through the harness, prints its pid, and waits.
    const harness = fileURLToPath(new URL('./redis-server.ts', import.meta.url));
    const script = `import { startRedis } from ${JSON.stringify(harness)}; const r = await startRedis(); console.log(r.pid); setInterval(() => undefined, 60_000);`;
    const holder = spawn(process.execPath, ['--import', 'tsx', '--conditions=@lanes/source', '--input-type=module', '-e', script], { stdio: ['ignore', 'pipe', 'inherit'] });
    let out = '';
    holder.stdout!.on('data', (chunk: Buffer) => (out += chunk.toString()));
    await waitFor('the holder to print its redis-server pid', () => /^\d+\n/.test(out));
    const pid = Number(out.trim());
    expect(alive(pid)).toBe(true);
    try {
      const exited = once(holder, 'exit');
      holder.kill('SIGKILL');
      await exited;
      await waitFor(`redis-server ${pid} to be gone with its harness`, () => !alive(pid));
    } finally {
      // When this fails, the server is this test's to end.
      if (alive(pid)) process.kill(pid, 'SIGKILL');
    }
  });
});
