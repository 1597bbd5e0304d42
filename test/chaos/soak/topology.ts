import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort, PROJECT_DIR } from '@lanes/cli';
import type { LanesConfigInput } from '@lanes/contracts';
import { downAfterMsOf, type SoakArgs } from './args.js';
import type { JanitorEntry } from './janitor.js';
import { createServiceAddress, createWorkerNet, MAX_NETNS_WORKERS, netnsAvailable, pickSubnet, routeToHost, setLink, type WorkerNet } from './netns.js';
import { isRunning, signalAndWait, spawnManaged, type Managed } from './processes.js';
import { exePath } from './proc.js';
import { startSentinelRedis, startSingleRedis, type SoakRedis } from './redis-group.js';

const HERE = dirname(fileURLToPath(import.meta.url));
export const AGENT_PATH = join(HERE, 'agent.mjs');
const JANITOR_PATH = join(HERE, 'janitor.ts');
const LANES_BIN = join(PROJECT_DIR, 'apps/cli/bin/lanes.js');
export const LANE = 'soak';
/** Starting a stack part (tsx compiling on a loaded 2-core box) can take this long. */
const START_TIMEOUT_MS = 60_000;
/** After SIGTERM a worker hands its cards back; past this it is killed. */
const DRAIN_TIMEOUT_MS = 30_000;

export type TopologyMode = 'netns' | 'plain';

/** One life of a worker process; a restart is a new instance with a new worker id. */
export interface WorkerInstance {
  index: number;
  proc: Managed;
  faulty: boolean;
  /** Windows in which the soak cut it off from Redis (partition), as [from, to] ms. */
  partitions: Array<[number, number]>;
}

export interface Topology {
  runId: string;
  mode: TopologyMode;
  dir: string;
  sandboxDir: string;
  logsDir: string;
  ledgerPath: string;
  apiUrl: string;
  /** The soak's Redis: one redis-server, or a Sentinel group (with --failovers). */
  redis: SoakRedis;
  /** Every worker instance ever started, in order. */
  instances: WorkerInstance[];
  supervisor: Managed;
  api: Managed;
  current(index: number): WorkerInstance;
  /** Restarts worker `index` (which must have exited); `faulty` gives it the create-failure config. */
  startWorker(index: number, faulty?: boolean): WorkerInstance;
  stopWorker(index: number, signal: 'SIGKILL' | 'SIGTERM'): Promise<{ exited: boolean }>;
  /** Resolves once Redis answers (under Sentinel: the primary every sentinel names), the API is ready and every current worker has started (or fails after the start timeout). */
  settled(): Promise<void>;
  /** Cuts worker `index` off from Redis (netns: link down; plain: SIGSTOP) or heals it. */
  partition(index: number, cut: boolean): void;
  /** Hands everything to the janitor and waits for it; returns what it removed. */
  teardown(): Promise<string[]>;
}

/** A process env without the caller's lanes settings, so the soak's own decide. */
function baseEnv(): NodeJS.ProcessEnv {
  return Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith('LANES_') && k !== 'REDIS_URL' && k !== 'NODE_OPTIONS'));
}

async function waitUntil(what: string, probe: () => Promise<boolean> | boolean, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await probe())) {
    if (Date.now() > deadline) throw new Error(`soak: timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface Janitor {
  register(e: JanitorEntry): void;
  /** Ends its input: it cleans up everything registered and exits; resolves with what it removed. */
  finish(): Promise<string[]>;
}

/** Starts the janitor (see janitor.ts) before anything else exists. */
export function startJanitor(): Janitor {
  const child = spawn(process.execPath, ['--import', 'tsx', JANITOR_PATH], { stdio: ['pipe', 'pipe', 'inherit'], detached: true, cwd: PROJECT_DIR });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  const output = new Promise<string>((r) => child.once('exit', () => r(out)));
  child.stdin!.on('error', () => undefined);
  let finished: Promise<string[]> | undefined;
  return {
    register: (e) => child.stdin!.write(`${JSON.stringify(e)}\n`),
    finish: () =>
      (finished ??= (async () => {
        child.stdin!.end();
        const out = await output;
        try {
          return (JSON.parse(out.trim().split('\n').at(-1) ?? '{}') as { cleaned?: string[] }).cleaned ?? [];
        } catch {
          return [`janitor said: ${out}`];
        }
      })()),
  };
}

export async function startTopology(args: SoakArgs, janitor: Janitor, log: (s: string) => void): Promise<Topology> {
  const runId = randomBytes(3).toString('hex');
  const dir = join(tmpdir(), `lanes-soak-${runId}`);
  janitor.register({ kind: 'dir', path: dir });
  if (args.keep) janitor.register({ kind: 'keep-dirs' });
  const sandboxDir = join(dir, 'sandboxes');
  const logsDir = join(dir, 'logs');
  const redisDir = join(dir, 'redis');
  for (const d of [sandboxDir, logsDir, redisDir, join(dir, 'runs')]) mkdirSync(d, { recursive: true });
  janitor.register({ kind: 'sandboxes', dir: sandboxDir });
  const ledgerPath = join(dir, 'ledger.jsonl');
  // The agent's ledger and sockets are the soak's side channel out of every sandbox: writable by
  // any uid, since a local lane on a root machine runs each sandbox as its own uid (separate-uid).
  writeFileSync(ledgerPath, '');
  chmodSync(ledgerPath, 0o666);
  chmodSync(join(dir, 'runs'), 0o777);
  const register = (m: { pid: number; startTime: number; label: string }) => janitor.register({ kind: 'process', ...m });

  const wantNetns = args.netns !== 'off';
  const mode: TopologyMode = wantNetns && netnsAvailable(`lanes-soak-${runId}-probe`) ? 'netns' : 'plain';
  if (args.netns === 'on' && mode !== 'netns') throw new Error('soak: --netns on, but this machine does not let us create network namespaces');
  const nets: WorkerNet[] = [];
  let subnet: string | undefined;
  if (mode === 'netns') {
    if (args.workers > MAX_NETNS_WORKERS) throw new Error(`soak: at most ${MAX_NETNS_WORKERS} workers in namespaces (--netns off for more)`);
    subnet = pickSubnet(parseInt(runId, 16));
    for (let i = 0; i < args.workers; i++) nets.push(createWorkerNet(runId, i, subnet, (kind, name) => janitor.register({ kind, name })));
  }

  // Redis: one redis-server bound to loopback and to the host end of each worker's veth, or (with
  // failovers) a Sentinel group at one address that the host and every namespace reach alike.
  let redis: SoakRedis;
  const redisOptions = { dir: redisDir, logsDir, env: baseEnv(), register };
  if (args.failovers > 0) {
    let address = '127.0.0.1';
    if (mode === 'netns') {
      address = createServiceAddress(runId, subnet!, (kind, name) => janitor.register({ kind, name }));
      for (const n of nets) routeToHost(n, address);
    }
    redis = await startSentinelRedis({ ...redisOptions, bind: [], address, downAfterMs: downAfterMsOf(args) });
  } else {
    redis = await startSingleRedis({ ...redisOptions, bind: nets.map((n) => n.hostAddress) });
  }

  const lane = (faulty: boolean): LanesConfigInput => ({
    lanes: [
      {
        name: LANE,
        provider: 'local',
        slots: args.slots,
        maxSlots: args.slots,
        agent: [process.execPath, AGENT_PATH],
        env: { SOAK_LEDGER: ledgerPath, SOAK_RUNS_DIR: join(dir, 'runs') },
        commandTimeoutMs: 120_000,
        // Sandbox kills land on random cards; a card hit a few times is still not the lane's fault.
        infraRetries: 10,
        ...(args.maxRunningPerKey !== undefined ? { maxRunningPerKey: args.maxRunningPerKey } : {}),
        ...(faulty ? { faults: { createFailures: args.createFailures } } : {}),
      },
    ],
  });
  const configPath = join(dir, 'lanes.json');
  const faultyConfigPath = join(dir, 'lanes-create-failures.json');
  writeFileSync(configPath, JSON.stringify(lane(false)));
  writeFileSync(faultyConfigPath, JSON.stringify(lane(true)));

  const apiPort = await freePort();
  const common = (redisHost: string, config: string): NodeJS.ProcessEnv => ({
    ...baseEnv(),
    REDIS_URL: redis.urlFor(redisHost),
    LANES_CONFIG: config,
    LANES_SANDBOX_DIR: sandboxDir,
    LANES_HEARTBEAT_INTERVAL_MS: String(args.heartbeatMs),
    LANES_LOCK_DURATION_MS: String(args.lockMs),
    LANES_LOG_LEVEL: 'info',
  });
  const part = (label: string, command: 'api' | 'supervisor', extra: NodeJS.ProcessEnv = {}) =>
    spawnManaged({
      label,
      command: process.execPath,
      args: [LANES_BIN, command],
      env: { ...common('127.0.0.1', configPath), ...extra },
      logPath: join(logsDir, `${label}.log`),
      cwd: PROJECT_DIR,
      register,
    });

  const api = part('api', 'api', { LANES_PORT: String(apiPort), LANES_HOST: '127.0.0.1' });
  const apiUrl = `http://127.0.0.1:${apiPort}`;
  const supervisor = part('supervisor', 'supervisor');

  const instances: WorkerInstance[] = [];
  const latest = new Map<number, WorkerInstance>();
  const startWorker = (index: number, faulty = false): WorkerInstance => {
    const net = nets[index];
    const n = instances.filter((w) => w.index === index).length;
    const nodeArgs = [process.execPath, LANES_BIN, 'worker'];
    const env = common(net ? net.hostAddress : '127.0.0.1', faulty ? faultyConfigPath : configPath);
    const proc = spawnManaged({
      label: `worker-${index}.${n}`,
      command: net ? 'ip' : nodeArgs[0]!,
      args: net ? ['netns', 'exec', net.netns, ...nodeArgs] : nodeArgs.slice(1),
      env,
      logPath: join(logsDir, `worker-${index}.${n}.log`),
      cwd: PROJECT_DIR,
      register,
    });
    const w: WorkerInstance = { index, proc, faulty, partitions: [] };
    instances.push(w);
    latest.set(index, w);
    return w;
  };
  for (let i = 0; i < args.workers; i++) startWorker(i);
  if (mode === 'netns') {
    // `ip netns exec` execs node in place: check that the pid we hold is node's, not a wrapper's.
    await waitUntil('workers to exec node inside their namespaces', () => instances.every((w) => exePath(w.proc.pid) === process.execPath || !isRunning(w.proc)), 10_000);
  }

  const readyz = async () => {
    try {
      return (await fetch(`${apiUrl}/readyz`)).status === 200;
    } catch {
      return false;
    }
  };
  await waitUntil('the API', readyz, START_TIMEOUT_MS);
  await waitUntil(
    `${args.workers * args.slots} live slots`,
    async () => {
      for (const m of [api, supervisor, ...instances.map((w) => w.proc)]) {
        if (!isRunning(m)) throw new Error(`soak: ${m.label} exited during start-up; see ${m.logPath}`);
      }
      try {
        const body = (await (await fetch(`${apiUrl}/v1/lanes`)).json()) as { lanes: Array<{ slots: Array<{ sandbox?: { state: string } }> }> };
        return (body.lanes[0]?.slots.filter((s) => s.sandbox?.state === 'live').length ?? 0) >= args.workers * args.slots;
      } catch {
        return false;
      }
    },
    START_TIMEOUT_MS,
  );
  log(
    `soak ${runId}: mode ${mode}${mode === 'netns' ? ` (workers in ${nets.map((n) => `${n.netns} ${n.nsAddress}`).join(', ')})` : ' (plain processes; a partition is SIGSTOP/SIGCONT of the worker)'}`,
  );
  log(`soak ${runId}: ${redis.describe()}, api ${apiUrl}, ${args.workers} workers × ${args.slots} slots, run dir ${dir}`);

  const current = (index: number) => latest.get(index)!;
  const hasStarted = (w: WorkerInstance) => {
    try {
      return readFileSync(w.proc.logPath, 'utf8').includes('"event":"worker.started"');
    } catch {
      return false;
    }
  };
  return {
    runId,
    mode,
    dir,
    sandboxDir,
    logsDir,
    ledgerPath,
    apiUrl,
    redis,
    instances,
    supervisor,
    api,
    current,
    startWorker,
    async settled() {
      await waitUntil(redis.kind === 'sentinel' ? 'the sentinels to agree on a primary that answers' : 'redis-server', () => redis.ready(), START_TIMEOUT_MS);
      await waitUntil('the API', readyz, START_TIMEOUT_MS);
      await waitUntil('every worker started', () => args.workers === 0 || [...latest.values()].every((w) => !isRunning(w.proc) || hasStarted(w)), START_TIMEOUT_MS);
    },
    async stopWorker(index, signal) {
      const w = current(index);
      const exited = await signalAndWait(w.proc, signal, signal === 'SIGKILL' ? 10_000 : DRAIN_TIMEOUT_MS);
      if (!exited) await signalAndWait(w.proc, 'SIGKILL', 10_000);
      return { exited };
    },
    partition(index, cut) {
      const w = current(index);
      const net = nets[index];
      if (net) setLink(net.hostLink, !cut);
      else process.kill(w.proc.pid, cut ? 'SIGSTOP' : 'SIGCONT');
      if (cut) w.partitions.push([Date.now(), Number.POSITIVE_INFINITY]);
      else {
        const open = w.partitions.at(-1);
        if (open) open[1] = Date.now();
      }
    },
    teardown: () => janitor.finish(),
  };
}
