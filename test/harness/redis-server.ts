import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, pingRedis } from '@lanes/cli';
import { waitFor } from './wait-for.js';

export interface TestRedis {
  url: string;
  port: number;
  /** SIGKILL, as a crash would. Data survives only with `appendonly`. */
  kill(): Promise<void>;
  /** Starts it again on the same port and dir. */
  start(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * A private redis-server on a free port for one suite; never the machine's 6379.
 * `appendonly` lets chaos tests kill and restart it without losing data.
 */
export async function startRedis({ appendonly = false } = {}): Promise<TestRedis> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'lanes-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;

  const start = async () => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no'];
    args.push('--appendonly', appendonly ? 'yes' : 'no', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction');
    child = spawn('redis-server', args, { stdio: 'ignore' });
    const exited = new Promise<never>((_, reject) =>
      child!.once('exit', (code) => reject(new Error(`redis-server exited with ${code}`))),
    );
    exited.catch(() => undefined);
    await waitFor(`redis-server on ${port}`, () => pingRedis('127.0.0.1', port));
  };

  const kill = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    c.kill('SIGKILL');
    await gone;
  };

  await start();
  return {
    url,
    port,
    kill,
    start,
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
