import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort } from '@lanes/cli';
import { formatRedisTarget } from '@lanes/contracts';
import { killChild, serverWatchdog, startRedis, type TestRedis } from './redis-server.js';
import { waitFor } from './wait-for.js';

/** What a sentinel group of the harness is made of, with defaults small enough for a test to fail over in seconds. */
export interface SentinelGroupOptions {
  /** The group's name (`sentinel monitor <name> …`). Default `lanes`. */
  name?: string;
  /** How many sentinels; the quorum is a majority of them. Default 3. */
  sentinels?: number;
  /** The data nodes' `requirepass` (the sentinels' `auth-pass`). Default none. */
  password?: string;
  /** The sentinels' own `requirepass` (and `sentinel-pass` among them). Default none. */
  sentinelPassword?: string;
  /** `down-after-milliseconds`: how long a silent primary takes to be judged down. Default 1000 (Redis: 30000). */
  downAfterMs?: number;
  /** `failover-timeout`: bounds one failover attempt and the wait before another. Default 3000 (Redis: 180000). */
  failoverTimeoutMs?: number;
}

export const DEFAULT_SENTINEL_DOWN_AFTER_MS = 1_000;
export const DEFAULT_SENTINEL_FAILOVER_TIMEOUT_MS = 3_000;
/** A failover is down-after, an election (a second or two) and a promotion: 20 s is a loaded box's worst. */
export const PROMOTION_TIMEOUT_MS = 20_000;

export interface TestSentinelGroup {
  name: string;
  /** `redis+sentinel://…/<name>` with every password: what REDIS_URL or `startTestStack` takes. */
  url: string;
  /** The data nodes as started: `[primary, replica]`. Which one is primary now is `primaryPort()`. */
  nodes: readonly TestRedis[];
  sentinelPorts: readonly number[];
  /** The pids of the redis-servers and sentinels this group started (a killed one's too). */
  pids(): number[];
  /** The primary's port as every live sentinel reports it (`SENTINEL get-master-addr-by-name`); they must agree. */
  primaryPort(): Promise<number>;
  /** The data node the sentinels name as primary now. */
  primary(): Promise<TestRedis>;
  /** `kill -9` of the node the sentinels name as primary; answers its port. */
  killPrimary(): Promise<number>;
  /**
   * Waits until every live sentinel names a primary other than `oldPort` and that node says it is a
   * master (`ROLE`); answers the new primary's port.
   */
  waitForPromotion(oldPort: number, options?: { timeoutMs?: number }): Promise<number>;
  /** A plain connection to one data node (by port), for reading what the stack wrote. */
  connect(port: number): Redis;
  /** Ends every sentinel and data node this group started, and only those. */
  stop(): Promise<void>;
}

interface SentinelProcess {
  port: number;
  dir: string;
  child: ChildProcess;
  watchdog: ChildProcess | undefined;
}

/** A short-lived connection for one question; never retries, so an answer is about one moment. */
function probe(port: number, password: string | undefined): Redis {
  const conn = new Redis({
    host: '127.0.0.1',
    port,
    ...(password !== undefined ? { password } : {}),
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    connectTimeout: 1_000,
  });
  conn.on('error', () => undefined);
  return conn;
}

async function ask<T>(port: number, password: string | undefined, fn: (conn: Redis) => Promise<T>): Promise<T | undefined> {
  const conn = probe(port, password);
  try {
    await conn.connect();
    return await fn(conn);
  } catch {
    return undefined;
  } finally {
    conn.disconnect();
  }
}

const field = (info: string, name: string) =>
  info
    .split('\r\n')
    .find((l) => l.startsWith(`${name}:`))
    ?.slice(name.length + 1);

async function startSentinel(conf: string, port: number, dir: string, password: string | undefined): Promise<SentinelProcess> {
  const child = spawn('redis-server', [conf, '--sentinel'], { stdio: ['ignore', 'ignore', 'pipe'] });
  const watchdog = child.pid === undefined ? undefined : serverWatchdog(child.pid);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  let exited: Error | undefined;
  child.once('error', (err) => (exited = err));
  child.once('exit', (code, signal) => {
    if (watchdog) void killChild(watchdog);
    exited = new Error(`sentinel (pid ${child.pid}) on ${port} exited with ${signal ?? code}${stderr ? `: ${stderr.trim()}` : ''}`);
  });
  const sentinel = { port, dir, child, watchdog };
  try {
    await waitFor(
      `sentinel pid ${child.pid} to answer on ${port} as itself`,
      async () => {
        if (exited) throw Object.assign(exited, { fatal: true });
        const info = await ask(port, password, (c) => c.info('server'));
        if (!info) return false;
        if (Number(field(info, 'process_id')) !== child.pid || field(info, 'redis_mode') !== 'sentinel') {
          throw Object.assign(new Error(`port ${port} is answered by another server (pid ${field(info, 'process_id')}), not sentinel pid ${child.pid}`), { fatal: true });
        }
        return true;
      },
      { abortOn: (err) => (err as { fatal?: boolean }).fatal === true },
    );
  } catch (err) {
    await stopSentinel(sentinel);
    throw err;
  }
  return sentinel;
}

async function stopSentinel(s: SentinelProcess): Promise<void> {
  if (s.watchdog) await killChild(s.watchdog);
  await killChild(s.child);
  rmSync(s.dir, { recursive: true, force: true });
}

/**
 * A primary, a replica of it (`--replicaof`) and `sentinels` sentinels watching them, all
 * `redis-server` processes of this harness on free ports, each with a watchdog that ends it if the
 * test process dies. Ready once the replica is in sync and every sentinel knows the replica and a
 * quorum of the others (`SENTINEL CKQUORUM`), so a failover can happen from the first moment.
 */
export async function startSentinelGroup(options: SentinelGroupOptions = {}): Promise<TestSentinelGroup> {
  const name = options.name ?? 'lanes';
  const count = options.sentinels ?? 3;
  const quorum = Math.floor(count / 2) + 1;
  const { password, sentinelPassword } = options;
  const nodes: TestRedis[] = [];
  const sentinels: SentinelProcess[] = [];
  const stop = async () => {
    // Sentinels first: a sentinel still running would try to reconfigure the nodes going away.
    for (const s of sentinels.splice(0)) await stopSentinel(s);
    const errors: unknown[] = [];
    for (const n of nodes.splice(0).reverse()) await n.stop().catch((err: unknown) => errors.push(err));
    if (errors.length > 0) throw errors[0];
  };
  const killed = new Set<number>();
  const startedPids: number[] = [];

  try {
    // A primary waits 5 s (repl-diskless-sync-delay) for more replicas before a full sync; here there is one.
    const syncNow = ['--repl-diskless-sync-delay', '0'];
    const auth = password !== undefined ? { password } : {};
    const primary = await startRedis({ ...auth, args: syncNow });
    nodes.push(primary);
    const replica = await startRedis({ ...auth, args: [...syncNow, '--replicaof', '127.0.0.1', String(primary.port)] });
    nodes.push(replica);
    await waitFor('the replica to sync with the primary', async () => {
      const info = await ask(replica.port, password, (c) => c.info('replication'));
      return info !== undefined && field(info, 'master_link_status') === 'up';
    });

    for (const n of nodes) if (n.pid !== undefined) startedPids.push(n.pid);
    // Each sentinel is told its own id and the others' (and the replica) up front, so the group is
    // whole at once instead of after rounds of hello messages (every 2 s) and INFO polls (every 10 s).
    const peers: Array<{ port: number; id: string }> = [];
    for (let i = 0; i < count; i++) peers.push({ port: await freePort(), id: randomBytes(20).toString('hex') });
    for (const { port, id } of peers) {
      const dir = mkdtempSync(join(tmpdir(), 'lanes-sentinel-'));
      const conf = join(dir, 'sentinel.conf');
      // Sentinel rewrites its config file as it learns (replicas, other sentinels, a new primary).
      const lines = [
        `port ${port}`,
        'bind 127.0.0.1',
        `dir ${dir}`,
        `sentinel monitor ${name} 127.0.0.1 ${primary.port} ${quorum}`,
        `sentinel down-after-milliseconds ${name} ${options.downAfterMs ?? DEFAULT_SENTINEL_DOWN_AFTER_MS}`,
        `sentinel failover-timeout ${name} ${options.failoverTimeoutMs ?? DEFAULT_SENTINEL_FAILOVER_TIMEOUT_MS}`,
        `sentinel parallel-syncs ${name} 1`,
        `sentinel myid ${id}`,
        `sentinel known-replica ${name} 127.0.0.1 ${replica.port}`,
        ...peers.filter((p) => p.id !== id).map((p) => `sentinel known-sentinel ${name} 127.0.0.1 ${p.port} ${p.id}`),
      ];
      if (password !== undefined) lines.push(`sentinel auth-pass ${name} ${password}`);
      if (sentinelPassword !== undefined) lines.push(`requirepass ${sentinelPassword}`, `sentinel sentinel-pass ${sentinelPassword}`);
      writeFileSync(conf, `${lines.join('\n')}\n`, { mode: 0o600 });
      const sentinel = await startSentinel(conf, port, dir, sentinelPassword);
      sentinels.push(sentinel);
      if (sentinel.child.pid !== undefined) startedPids.push(sentinel.child.pid);
    }
    await waitFor(
      `every sentinel to know the replica and reach a quorum of ${quorum}`,
      async () => {
        for (const s of sentinels) {
          const ready = await ask(s.port, sentinelPassword, async (c) => {
            const replicas = (await c.call('SENTINEL', 'REPLICAS', name)) as unknown[];
            const others = (await c.call('SENTINEL', 'SENTINELS', name)) as unknown[];
            const ok = (await c.call('SENTINEL', 'CKQUORUM', name)) as string;
            return replicas.length >= 1 && others.length === count - 1 && ok.startsWith('OK');
          });
          if (!ready) return false;
        }
        return true;
      },
      { timeoutMs: 30_000 },
    );
  } catch (err) {
    await stop();
    throw err;
  }

  const liveSentinels = () => sentinels.filter((s) => s.child.exitCode === null && s.child.signalCode === null);
  const reported = async (): Promise<Array<number | undefined>> =>
    Promise.all(
      liveSentinels().map((s) =>
        ask(s.port, sentinelPassword, async (c) => {
          const addr = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', name)) as [string, string] | null;
          return addr ? Number(addr[1]) : undefined;
        }),
      ),
    );
  const nodeAt = (port: number) => {
    const node = nodes.find((n) => n.port === port);
    if (!node) throw new Error(`the sentinels name 127.0.0.1:${port}, which is none of this group's nodes`);
    return node;
  };
  const primaryPort = async () => {
    const ports = await reported();
    const first = ports[0];
    if (first === undefined || ports.some((p) => p !== first)) throw new Error(`the sentinels disagree on the primary: ${JSON.stringify(ports)}`);
    return first;
  };

  return {
    name,
    url: formatRedisTarget({
      kind: 'sentinel',
      sentinels: sentinels.map((s) => ({ host: '127.0.0.1', port: s.port })),
      name,
      tls: false,
      db: 0,
      ...(password !== undefined ? { password } : {}),
      ...(sentinelPassword !== undefined ? { sentinelPassword } : {}),
    }),
    nodes,
    sentinelPorts: sentinels.map((s) => s.port),
    pids: () => [...startedPids],
    primaryPort,
    primary: async () => nodeAt(await primaryPort()),
    async killPrimary() {
      const port = await primaryPort();
      await nodeAt(port).kill();
      killed.add(port);
      return port;
    },
    async waitForPromotion(oldPort, { timeoutMs = PROMOTION_TIMEOUT_MS } = {}) {
      return waitFor(
        `the sentinels to promote a replica in place of 127.0.0.1:${oldPort}`,
        async () => {
          const ports = await reported();
          const port = ports[0];
          if (port === undefined || port === oldPort || ports.some((p) => p !== port) || killed.has(port)) return undefined;
          const role = await ask(port, password, async (c) => ((await c.call('ROLE')) as [string])[0]);
          return role === 'master' ? port : undefined;
        },
        { timeoutMs },
      );
    },
    connect(port) {
      const conn = new Redis({ host: '127.0.0.1', port, ...(password !== undefined ? { password } : {}), maxRetriesPerRequest: null });
      conn.on('error', () => undefined);
      return conn;
    },
    stop,
  };
}
