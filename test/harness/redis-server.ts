import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '@lanes/cli';
import { waitFor } from './wait-for.js';

export interface TestRedis {
  url: string;
  port: number;
  /** The pid of the redis-server this harness started (the current one, after a restart). */
  readonly pid: number | undefined;
  /** SIGKILL, as a crash would. Data survives only with `appendonly`. */
  kill(): Promise<void>;
  /** Starts it again on the same port and dir, and checks again that what answers there is this child. */
  start(): Promise<void>;
  /** Ends it. Rejects if the child had exited without being told to: a test's Redis dying is an error. */
  stop(): Promise<void>;
}

/**
 * Ends the redis-server `pid` when this process dies without stopping it (kill -9, or `timeout`
 * ending a bench): a shell holding a pipe from this process reads EOF when the pipe closes with
 * it, and kills the server. Ended itself before the server is (see `kill`), so it never fires on a
 * pid that was reused.
 */
export function serverWatchdog(pid: number): ChildProcess {
  const watchdog = spawn('sh', ['-c', 'read _; kill -9 "$0" 2>/dev/null', String(pid)], { stdio: ['pipe', 'ignore', 'ignore'] });
  // It must not keep a bench or a test worker alive by itself.
  watchdog.unref();
  (watchdog.stdin as { unref?: () => void } | null)?.unref?.();
  return watchdog;
}

/** Kills a child and waits for its exit; nothing when it has exited already. */
export async function killChild(c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return;
  const gone = new Promise((r) => c.once('exit', r));
  c.kill('SIGKILL');
  await gone;
}

/** One connection attempt per probe; no retries, so a probe answers for one moment. */
const IDENTITY_PROBE_TIMEOUT_MS = 1_000;

/**
 * The pid and port of the redis-server answering on `port`, from its own `INFO server`; undefined
 * when nothing (or nothing that is Redis) answers.
 */
export async function redisIdentity(port: number, password?: string): Promise<{ pid: number; port: number; dir: string } | undefined> {
  const conn = new Redis({
    host: '127.0.0.1',
    port,
    ...(password !== undefined ? { password } : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    connectTimeout: IDENTITY_PROBE_TIMEOUT_MS,
  });
  conn.on('error', () => undefined);
  try {
    await conn.connect();
    const info = await conn.info('server');
    const dir = (await conn.config('GET', 'dir')) as string[];
    const field = (name: string) =>
      info
        .split('\r\n')
        .find((l) => l.startsWith(`${name}:`))
        ?.slice(name.length + 1);
    return { pid: Number(field('process_id')), port: Number(field('tcp_port')), dir: dir[1] ?? '' };
  } catch {
    return undefined;
  } finally {
    conn.disconnect();
  }
}

/**
 * A private redis-server on a free port for one suite; never the machine's 6379.
 * `appendonly` lets chaos tests kill and restart it without losing data. It is ready only when
 * the server on the port says it is this child (INFO process_id and its dir), so a port race or
 * a restart on a reused port can never silently share another file's Redis; a child that exits
 * while starting fails the start at once.
 */
export async function startRedis({
  appendonly = false,
  port: askedPort,
  password,
  args: extraArgs = [],
}: {
  appendonly?: boolean;
  port?: number;
  /** `requirepass` (and `masterauth`, for a replica of a primary with the same password); in `url` too. */
  password?: string;
  /** More redis-server arguments, e.g. `['--replicaof', host, port]`. */
  args?: readonly string[];
} = {}): Promise<TestRedis> {
  const port = askedPort ?? (await freePort());
  const dir = mkdtempSync(join(tmpdir(), 'lanes-redis-'));
  const url = password === undefined ? `redis://127.0.0.1:${port}` : `redis://:${encodeURIComponent(password)}@127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let watchdog: ChildProcess | undefined;
  /** Set when a child exits without kill() or stop() asking it to. */
  let unexpectedExit: Error | undefined;
  let expectingExit = false;

  const start = async () => {
    const args = ['--port', String(port), '--bind', '127.0.0.1', '--dir', dir, '--save', '', '--daemonize', 'no'];
    args.push('--appendonly', appendonly ? 'yes' : 'no', '--appendfsync', 'always', '--maxmemory-policy', 'noeviction');
    if (password !== undefined) args.push('--requirepass', password, '--masterauth', password);
    args.push(...extraArgs);
    const c = spawn('redis-server', args, { stdio: ['ignore', 'ignore', 'pipe'] });
    child = c;
    const w = c.pid === undefined ? undefined : serverWatchdog(c.pid);
    watchdog = w;
    expectingExit = false;
    let stderr = '';
    c.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    let exited: Error | undefined;
    c.once('error', (err) => (exited = err));
    c.once('exit', (code, signal) => {
      // Its pid may be reused from now on.
      if (w) void killChild(w);
      exited = new Error(`redis-server (pid ${c.pid}) on ${port} exited with ${signal ?? code}${stderr ? `: ${stderr.trim()}` : ''}`);
      if (!expectingExit && child === c) unexpectedExit ??= exited;
    });
    await waitFor(
      `redis-server pid ${c.pid} to answer on ${port} as itself`,
      async () => {
        if (exited) throw Object.assign(exited, { fatal: true });
        const id = await redisIdentity(port, password);
        if (!id) return false;
        if (id.pid !== c.pid || id.port !== port || id.dir !== dir) {
          throw Object.assign(new Error(`port ${port} is answered by another redis-server (pid ${id.pid}, dir ${id.dir}), not pid ${c.pid}`), { fatal: true });
        }
        return true;
      },
      { abortOn: (err) => (err as { fatal?: boolean }).fatal === true },
    );
    // It exited before it could bind: not ready, whatever waitFor saw last.
    if (exited) throw exited;
  };

  const kill = async () => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    expectingExit = true;
    if (watchdog) await killChild(watchdog);
    await killChild(c);
  };

  try {
    await start();
  } catch (err) {
    await kill();
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  return {
    url,
    port,
    get pid() {
      return child?.pid;
    },
    kill,
    async start() {
      try {
        await start();
      } catch (err) {
        await kill();
        throw err;
      }
    },
    async stop() {
      await kill();
      rmSync(dir, { recursive: true, force: true });
      if (unexpectedExit) throw unexpectedExit;
    },
  };
}
