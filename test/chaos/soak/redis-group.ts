import { randomBytes } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { freePort, pingRedis } from '@lanes/cli';
import { formatRedisTarget } from '@lanes/contracts';
import { isRunning, signalAndWait, spawnManaged, type Managed } from './processes.js';

/**
 * The soak's Redis: one redis-server, or a Sentinel group (a primary, a replica and three
 * sentinels), every process of it started, watched and killed by the soak (registered with its
 * janitor), its data and logs in the run directory. Every data node runs with AOF and
 * `appendfsync always`, so a node killed and restarted from its AOF loses nothing it acknowledged.
 */

/** The Sentinel group's name (`sentinel monitor <name> …`). */
export const SENTINEL_GROUP = 'soak';
const SENTINELS = 3;
const QUORUM = 2;
/** `failover-timeout`: bounds one failover attempt and the wait before another (Redis: 180 s). */
const FAILOVER_TIMEOUT_MS = 3_000;
/** A data node or sentinel answers this long after its start at the latest (AOF load, a loaded box). */
const START_TIMEOUT_MS = 60_000;

export interface RedisNode {
  label: string;
  port: number;
  dir: string;
  /** The node's current life; a killed node keeps its last one (exited). */
  proc?: Managed;
}

export interface SentinelControl {
  name: string;
  downAfterMs: number;
  /** The data nodes, as started: `[primary, replica]`. Which is primary now is `SoakRedis.primary()`. */
  nodes: readonly RedisNode[];
  sentinelPorts: readonly number[];
  /** Waits until every sentinel names a node other than `old` as primary, and it says it is a master. */
  waitForPromotion(old: RedisNode, timeoutMs: number): Promise<RedisNode | undefined>;
  /** Waits until `replica` is in sync with its primary (`master_link_status:up`). */
  waitForSync(replica: RedisNode, timeoutMs: number): Promise<boolean>;
}

export interface SoakRedis {
  kind: 'single' | 'sentinel';
  /** The REDIS_URL of a stack process that reaches the host at `hostAddress` (127.0.0.1 on the host, its veth's host end from a namespace). */
  urlFor(hostAddress: string): string;
  /** The data node that is primary now (under Sentinel: as every sentinel names it; they must agree). */
  primary(): Promise<RedisNode>;
  /** `kill -9` of a data node; resolves once it has exited. */
  kill(node: RedisNode): Promise<void>;
  /** Starts `node` again on its port from its AOF: as a primary, or as a replica of `replicaOf`. */
  start(node: RedisNode, replicaOf?: RedisNode): Promise<void>;
  /** The primary answers (and, under Sentinel, every sentinel names the same one). */
  ready(): Promise<boolean>;
  /** Every process of it this run started, each life (for the leftovers check). */
  processes(): Managed[];
  describe(): string;
  sentinel?: SentinelControl;
}

type Register = (m: { pid: number; startTime: number; label: string }) => void;

export interface SoakRedisOptions {
  /** The run's redis directory: each data node and sentinel gets its own directory under it. */
  dir: string;
  logsDir: string;
  /** Addresses the data nodes listen on besides 127.0.0.1. */
  bind: readonly string[];
  env: NodeJS.ProcessEnv;
  register: Register;
}

/** A short-lived connection for one question; never retries, so an answer is about one moment. */
export async function ask<T>(port: number, fn: (conn: Redis) => Promise<T>, timeoutMs = 2_000): Promise<T | undefined> {
  const conn = new Redis({
    host: '127.0.0.1',
    port,
    lazyConnect: true,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
    enableOfflineQueue: false,
    connectTimeout: timeoutMs,
    commandTimeout: timeoutMs,
  });
  conn.on('error', () => undefined);
  try {
    await conn.connect();
    return await fn(conn);
  } catch {
    return undefined;
  } finally {
    conn.disconnect();
  }
}

/** `INFO <section>` as fields. */
export async function info(port: number, section: string): Promise<Record<string, string> | undefined> {
  const text = await ask(port, (c) => c.info(section));
  if (text === undefined) return undefined;
  const out: Record<string, string> = {};
  for (const line of text.split('\r\n')) {
    const i = line.indexOf(':');
    if (i > 0 && !line.startsWith('#')) out[line.slice(0, i)] = line.slice(i + 1);
  }
  return out;
}

async function waitUntil<T>(what: string, probe: () => Promise<T | undefined | false>, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`soak: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** Free ports, all different (freePort may hand the same one out twice in a row). */
async function freePorts(n: number): Promise<number[]> {
  const out: number[] = [];
  while (out.length < n) {
    const p = await freePort();
    if (!out.includes(p)) out.push(p);
  }
  return out;
}

/**
 * A data node's command line: AOF with fsync on every write, so a kill -9 loses nothing
 * acknowledged; bound to loopback and `bind`; `announce` is the address a replica gives its
 * primary (and so the sentinels); `replicaOf` makes it a replica from the start.
 */
export function dataNodeArgs(o: { port: number; dir: string; bind: readonly string[]; announce?: string; replicaOf?: { host: string; port: number } }): string[] {
  return [
    '--port',
    String(o.port),
    '--bind',
    '127.0.0.1',
    ...o.bind,
    '--protected-mode',
    'no',
    '--dir',
    o.dir,
    '--appendonly',
    'yes',
    '--appendfsync',
    'always',
    '--save',
    '',
    '--daemonize',
    'no',
    '--maxmemory-policy',
    'noeviction',
    // A primary waits 5 s (repl-diskless-sync-delay) for more replicas before a full sync; there is one.
    '--repl-diskless-sync-delay',
    '0',
    ...(o.announce !== undefined ? ['--replica-announce-ip', o.announce] : []),
    ...(o.replicaOf ? ['--replicaof', o.replicaOf.host, String(o.replicaOf.port)] : []),
  ];
}

/**
 * A sentinel's config. Every address in it is `address`, the one the data nodes are reached at
 * from the host and from every worker's namespace alike, since a sentinel tells clients the primary
 * as it knows it. Each sentinel is told its own id, the others' and the replica up front, so the
 * group is whole at once instead of after rounds of hello messages and INFO polls.
 */
export function sentinelConf(o: {
  port: number;
  dir: string;
  address: string;
  name: string;
  primaryPort: number;
  replicaPort: number;
  downAfterMs: number;
  failoverTimeoutMs: number;
  quorum: number;
  myId: string;
  peers: ReadonlyArray<{ port: number; id: string }>;
}): string {
  const lines = [
    `port ${o.port}`,
    `bind ${o.address === '127.0.0.1' ? '127.0.0.1' : `127.0.0.1 ${o.address}`}`,
    'protected-mode no',
    `dir ${o.dir}`,
    `sentinel announce-ip ${o.address}`,
    `sentinel monitor ${o.name} ${o.address} ${o.primaryPort} ${o.quorum}`,
    `sentinel down-after-milliseconds ${o.name} ${o.downAfterMs}`,
    `sentinel failover-timeout ${o.name} ${o.failoverTimeoutMs}`,
    `sentinel parallel-syncs ${o.name} 1`,
    `sentinel myid ${o.myId}`,
    `sentinel known-replica ${o.name} ${o.address} ${o.replicaPort}`,
    ...o.peers.filter((p) => p.id !== o.myId).map((p) => `sentinel known-sentinel ${o.name} ${o.address} ${p.port} ${p.id}`),
  ];
  return `${lines.join('\n')}\n`;
}

function startNodeProcess(node: RedisNode, args: string[], o: SoakRedisOptions, lives: Managed[]): Managed {
  const proc = spawnManaged({ label: node.label, command: 'redis-server', args, env: o.env, logPath: join(o.logsDir, `${node.label}.log`), cwd: node.dir, register: o.register });
  node.proc = proc;
  lives.push(proc);
  return proc;
}

async function answers(node: RedisNode): Promise<boolean> {
  if (node.proc && !isRunning(node.proc)) throw new Error(`soak: ${node.label} exited during its start; see ${node.proc.logPath}`);
  return pingRedis('127.0.0.1', node.port);
}

/** One redis-server (the soak without failovers): killed and restarted on its port for a Redis kill. */
export async function startSingleRedis(o: SoakRedisOptions): Promise<SoakRedis> {
  const [port] = await freePorts(1);
  const node: RedisNode = { label: 'redis-server', port: port!, dir: o.dir };
  const lives: Managed[] = [];
  const start = async () => {
    startNodeProcess(node, dataNodeArgs({ port: node.port, dir: node.dir, bind: o.bind }), o, lives);
    await waitUntil(`${node.label} :${node.port}`, () => answers(node), START_TIMEOUT_MS);
  };
  await start();
  return {
    kind: 'single',
    urlFor: (host) => `redis://${host}:${node.port}`,
    primary: async () => node,
    kill: async (n) => {
      if (n.proc) await signalAndWait(n.proc, 'SIGKILL', 10_000);
    },
    start: () => start(),
    ready: () => pingRedis('127.0.0.1', node.port),
    processes: () => [...lives],
    describe: () => `redis-server :${node.port} (AOF, fsync always)`,
  };
}

/**
 * A primary, a replica of it and three sentinels (quorum 2) at `address`. Ready once the replica
 * is in sync and every sentinel knows the replica and the other two and has its quorum
 * (`SENTINEL CKQUORUM`), so a failover can happen from the first moment.
 */
export async function startSentinelRedis(o: SoakRedisOptions & { address: string; downAfterMs: number }): Promise<SoakRedis> {
  const [aPort, bPort, ...sentinelPorts] = await freePorts(2 + SENTINELS);
  const nodes: RedisNode[] = [
    { label: 'redis-a', port: aPort!, dir: join(o.dir, 'a') },
    { label: 'redis-b', port: bPort!, dir: join(o.dir, 'b') },
  ];
  for (const n of nodes) mkdirSync(n.dir, { recursive: true });
  const lives: Managed[] = [];
  const bind = o.address === '127.0.0.1' ? [] : [o.address];
  const start = async (node: RedisNode, replicaOf?: RedisNode) => {
    const args = dataNodeArgs({ port: node.port, dir: node.dir, bind, announce: o.address, ...(replicaOf ? { replicaOf: { host: o.address, port: replicaOf.port } } : {}) });
    startNodeProcess(node, args, o, lives);
    await waitUntil(`${node.label} :${node.port}`, () => answers(node), START_TIMEOUT_MS);
  };
  const waitForSync = async (replica: RedisNode, timeoutMs: number) => {
    try {
      await waitUntil(`${replica.label} to sync with its primary`, async () => (await info(replica.port, 'replication'))?.master_link_status === 'up', timeoutMs);
      return true;
    } catch {
      return false;
    }
  };
  await start(nodes[0]!);
  await start(nodes[1]!, nodes[0]!);
  if (!(await waitForSync(nodes[1]!, START_TIMEOUT_MS))) throw new Error('soak: the replica never synced with the primary');

  const peers = sentinelPorts.map((port) => ({ port, id: randomBytes(20).toString('hex') }));
  const sentinels: Managed[] = [];
  for (const [i, peer] of peers.entries()) {
    const dir = join(o.dir, `sentinel-${i}`);
    mkdirSync(dir, { recursive: true });
    const conf = join(dir, 'sentinel.conf');
    // Sentinel rewrites its config as it learns (replicas, other sentinels, a new primary).
    writeFileSync(
      conf,
      sentinelConf({
        port: peer.port,
        dir,
        address: o.address,
        name: SENTINEL_GROUP,
        primaryPort: nodes[0]!.port,
        replicaPort: nodes[1]!.port,
        downAfterMs: o.downAfterMs,
        failoverTimeoutMs: FAILOVER_TIMEOUT_MS,
        quorum: QUORUM,
        myId: peer.id,
        peers,
      }),
      { mode: 0o600 },
    );
    const proc = spawnManaged({
      label: `sentinel-${i}`,
      command: 'redis-server',
      args: [conf, '--sentinel'],
      env: o.env,
      logPath: join(o.logsDir, `sentinel-${i}.log`),
      cwd: dir,
      register: o.register,
    });
    sentinels.push(proc);
    lives.push(proc);
  }
  await waitUntil(
    `every sentinel to know the replica and the other sentinels and reach its quorum of ${QUORUM}`,
    async () => {
      for (const [i, s] of sentinels.entries()) {
        if (!isRunning(s)) throw new Error(`soak: ${s.label} exited during its start; see ${s.logPath}`);
        const ok = await ask(peers[i]!.port, async (c) => {
          const replicas = (await c.call('SENTINEL', 'REPLICAS', SENTINEL_GROUP)) as unknown[];
          const others = (await c.call('SENTINEL', 'SENTINELS', SENTINEL_GROUP)) as unknown[];
          const quorum = (await c.call('SENTINEL', 'CKQUORUM', SENTINEL_GROUP)) as string;
          return replicas.length >= 1 && others.length === SENTINELS - 1 && quorum.startsWith('OK');
        });
        if (!ok) return false;
      }
      return true;
    },
    START_TIMEOUT_MS,
  );

  /** The primary's port as each sentinel names it (undefined: that one did not answer). */
  const named = () =>
    Promise.all(
      sentinelPorts.map((port) =>
        ask(port, async (c) => {
          const addr = (await c.call('SENTINEL', 'GET-MASTER-ADDR-BY-NAME', SENTINEL_GROUP)) as [string, string] | null;
          return addr ? Number(addr[1]) : undefined;
        }),
      ),
    );
  const agreed = async (): Promise<RedisNode | undefined> => {
    const ports = await named();
    const first = ports[0];
    if (first === undefined || ports.some((p) => p !== first)) return undefined;
    return nodes.find((n) => n.port === first);
  };
  const role = (node: RedisNode) => ask(node.port, async (c) => ((await c.call('ROLE')) as [string])[0]);
  const url = formatRedisTarget({ kind: 'sentinel', sentinels: sentinelPorts.map((port) => ({ host: o.address, port })), name: SENTINEL_GROUP, tls: false, db: 0 });

  return {
    kind: 'sentinel',
    urlFor: () => url,
    primary: () => waitUntil('the sentinels to agree on the primary', agreed, START_TIMEOUT_MS),
    kill: async (n) => {
      if (n.proc) await signalAndWait(n.proc, 'SIGKILL', 10_000);
    },
    start,
    ready: async () => {
      const p = await agreed();
      return p !== undefined && (await pingRedis('127.0.0.1', p.port)) && (await role(p)) === 'master';
    },
    processes: () => [...lives],
    describe: () =>
      `Sentinel group "${SENTINEL_GROUP}" at ${o.address}: ${nodes.map((n) => `${n.label} :${n.port}`).join(', ')} (AOF, fsync always; ${nodes[1]!.label} a replica), sentinels :${sentinelPorts.join(', :')} (quorum ${QUORUM}, down-after ${o.downAfterMs} ms)`,
    sentinel: {
      name: SENTINEL_GROUP,
      downAfterMs: o.downAfterMs,
      nodes,
      sentinelPorts,
      async waitForPromotion(old, timeoutMs) {
        try {
          return await waitUntil(
            `the sentinels to promote a replica in place of ${old.label}`,
            async () => {
              const p = await agreed();
              if (!p || p === old || (p.proc && !isRunning(p.proc))) return undefined;
              return (await role(p)) === 'master' ? p : undefined;
            },
            timeoutMs,
          );
        } catch {
          return undefined;
        }
      },
      waitForSync,
    },
  };
}
