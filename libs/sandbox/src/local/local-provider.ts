import { randomBytes, randomUUID } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { SandboxSpec, SandboxTags } from '@lanes/contracts';
import { ConnectTimeoutError, IllegalStateError, ProviderInvalidError, ProviderUnavailableError, STACK_ENV_PATTERN, agentLimits, defaults } from '@lanes/contracts';
import { agentBaseEnv } from '../agent-env.js';
import { bestEffort, type CleanupErrorSink } from '../best-effort.js';
import { DeadlineExceeded, withDeadline } from '../deadline.js';
import { InitChannel } from './init-channel.js';
import { LIFELINE_FD, detectIsolation, rootCommand, type IsolationMode } from './isolation.js';
import { SpawnerProcess } from './root-spawner.js';
import { inProcessSpawner, type RootSpawner, type SandboxRoot } from './sandbox-root.js';
import { resolveLaneIsolation } from './lane-isolation.js';
import { LocalSandbox } from './local-sandbox.js';
import { childrenOf, isAlive, readStat } from '../proc.js';
import type { CreateOptions, SandboxProvider, SandboxRef } from '../provider.js';
import { SANDBOX_ID_ENV, reapSandbox } from '../sandbox-reaper.js';
import { endedWithOwner, ownerAlive, ownerOf } from './sandbox-owner.js';
import { isValidSandboxId, listRecords, readRecord, readRecordSync, sandboxDir, writeRecord, type SandboxRecord } from './sandbox-registry.js';
import { leaseUid, prepareBaseDir, prepareSandboxDirs, probeSeparateUid, releaseUid } from './separate-uid.js';
import { START_CANARY_ENV, awaitStartCanary, startCanary } from './start-canary.js';

/** Resolved from this module so it works from src/ (tsx, vitest) and dist/ alike. */
export const LOCAL_INIT_PATH = fileURLToPath(new URL('../../runtime/local-init.mjs', import.meta.url));
/** Default parent of every sandbox directory. */
export const DEFAULT_LOCAL_BASE_DIR = join(tmpdir(), 'lanes-sandboxes');
/** Enough init stderr to explain a crash without holding on to a chatty one. */
const STDERR_TAIL_CHARS = 4_096;
/** Keeps ExecResult bounded for chatty commands (agentLimits). */
export const DEFAULT_MAX_OUTPUT_CHARS = agentLimits.DEFAULT_MAX_OUTPUT_CHARS;
/** Node's setTimeout overflows above 2^31-1 ms; the init's lifetime timer is one. */
const MAX_TIMER_MS = 2 ** 31 - 1;

export interface LocalProviderDeps {
  /** Milliseconds clock for exec durations. */
  now: () => number;
  /** Sandbox ids; must match [A-Za-z0-9][A-Za-z0-9._-]* (they become directory names). */
  newId: () => string;
  /** Nonces of the start canary (start-canary.ts). */
  newNonce: () => string;
  /** Where failures of best-effort cleanup go (e.g. a logger); default: dropped. */
  onCleanupError?: CleanupErrorSink;
}

export interface LocalProviderOptions {
  /** Parent of `<id>/sandbox.json` and `<id>/work/`. Default `os.tmpdir()/lanes-sandboxes`. Share it with the supervisor so it can reap by id. */
  baseDir?: string;
  /** `auto` (default) uses a PID namespace when `unshare` works on this machine, else a process group. */
  isolation?: 'auto' | IsolationMode;
  /** Grace between SIGINT, SIGTERM and SIGKILL when an exec does not set one. Default DEFAULT_KILL_GRACE_MS. */
  killGraceMs?: number;
  /** Per stream, how much of the output's tail ExecResult keeps (`onOutput` sees all). Default DEFAULT_MAX_OUTPUT_CHARS. */
  maxOutputChars?: number;
  /** Environment sandboxes start from. Default: `agentBaseEnv(process.env)`, an allow-list that holds nothing of the stack's own. */
  baseEnv?: Readonly<Record<string, string | undefined>>;
  /** Where a spec's `secrets` (names of environment variables) are looked up. Default: this process's environment. */
  secretEnv?: Readonly<Record<string, string | undefined>>;
  /**
   * Who forks sandbox roots: `spawner` (default) a small process of this one's
   * (runtime/root-spawner.mjs), so this process's memory does not make each fork dear; `in-process`
   * this process itself.
   */
  rootSpawner?: 'spawner' | 'in-process';
  /** `separate-uid`: the most processes and threads the agent's uid may hold (RLIMIT_NPROC). Default SANDBOX_MAX_PROCESSES. */
  agentMaxProcesses?: number;
  /** argv of the init the root runs. Default `[process.execPath, LOCAL_INIT_PATH]`; tests swap in one that never answers. */
  initCommand?: readonly string[];
  deps?: Partial<LocalProviderDeps>;
}

/**
 * Sandboxes as real process trees on this machine. Each one is a detached root (`unshare` into a
 * fresh PID namespace where allowed) running `runtime/local-init.mjs`, which executes commands on
 * request. Its `pid` is the host pid whose SIGKILL ends everything in the sandbox.
 *
 * Sandboxes end with the process that created them, even when it is SIGKILLed: the root inherits
 * a lifeline (fd 3) whose other end only this process holds, and the init ends the sandbox on its
 * EOF. Roots are forked by a small spawner process (root-spawner.ts), which hands that end back.
 * Detaching (`close()`) keeps them running while this process lives; the supervisor still lists
 * leftovers from `baseDir` and terminates them by id. Local sandboxes share the host's
 * filesystem and network: only `separate-uid` (an unprivileged uid of the sandbox's own) keeps an
 * agent from the worker and the other slots (README "Threat model").
 */
export class LocalSandboxProvider implements SandboxProvider {
  readonly name = 'local';
  readonly baseDir: string;
  private readonly killGraceMs: number;
  private readonly maxOutputChars: number;
  private readonly baseEnv: Readonly<Record<string, string | undefined>>;
  private readonly secretEnv: Readonly<Record<string, string | undefined>>;
  private readonly initCommand: readonly string[];
  private readonly agentMaxProcesses: number | undefined;
  private readonly deps: LocalProviderDeps;
  private readonly requestedIsolation: 'auto' | IsolationMode;
  private readonly handles = new Map<string, LocalSandbox>();
  private readonly spawner: RootSpawner;
  private closed = false;

  constructor(options: LocalProviderOptions = {}) {
    this.baseDir = options.baseDir ?? DEFAULT_LOCAL_BASE_DIR;
    this.killGraceMs = options.killGraceMs ?? defaults.DEFAULT_KILL_GRACE_MS;
    if (!(this.killGraceMs > 0 && this.killGraceMs <= MAX_TIMER_MS)) {
      throw new ProviderInvalidError('local', `killGraceMs must be positive, got ${this.killGraceMs}`);
    }
    this.maxOutputChars = options.maxOutputChars ?? DEFAULT_MAX_OUTPUT_CHARS;
    if (!(this.maxOutputChars > 0)) throw new ProviderInvalidError('local', `maxOutputChars must be positive, got ${this.maxOutputChars}`);
    this.baseEnv = options.baseEnv ?? agentBaseEnv(process.env);
    this.secretEnv = options.secretEnv ?? process.env;
    this.initCommand = options.initCommand ?? [process.execPath, LOCAL_INIT_PATH];
    this.agentMaxProcesses = options.agentMaxProcesses;
    this.requestedIsolation = options.isolation ?? 'auto';
    this.spawner = options.rootSpawner === 'in-process' ? inProcessSpawner() : new SpawnerProcess();
    this.deps = {
      now: options.deps?.now ?? Date.now,
      newId: options.deps?.newId ?? newLocalSandboxId,
      newNonce: options.deps?.newNonce ?? (() => `lanes-canary-${randomUUID()}`),
      onCleanupError: options.deps?.onCleanupError,
    };
  }

  /**
   * The fencing new sandboxes get: `auto` is the strongest this machine allows (probed once per
   * process), and `why` says what kept a stronger one away. An explicit `separate-uid` the machine
   * cannot do is refused at create (ProviderInvalidError naming the reason), never weakened.
   */
  get isolation(): IsolationMode {
    return this.isolationChoice.mode;
  }

  get isolationChoice(): { mode: IsolationMode; why?: string } {
    if (this.requestedIsolation !== 'auto') return { mode: this.requestedIsolation };
    const machine = { pidNamespace: detectIsolation() === 'pid-namespace', separateUid: probeSeparateUid(this.baseDir) };
    const { mode, why } = resolveLaneIsolation({ provider: 'local', isolation: 'auto' }, machine, undefined);
    return { mode: mode as IsolationMode, ...(why ? { why } : {}) };
  }

  async create(spec: SandboxSpec, options: CreateOptions = {}): Promise<LocalSandbox> {
    if (this.closed) throw new IllegalStateError('local provider is closed');
    const connectTimeoutMs = options.connectTimeoutMs ?? defaults.DEFAULT_CONNECT_TIMEOUT_MS;
    if (spec.timeoutMs !== undefined && spec.timeoutMs > MAX_TIMER_MS) {
      throw new ProviderInvalidError('local', `spec.timeoutMs must be at most ${MAX_TIMER_MS} ms`);
    }
    const id = this.deps.newId();
    if (!isValidSandboxId(id)) throw new ProviderInvalidError('local', `invalid sandbox id ${JSON.stringify(id)}`);
    const dir = sandboxDir(this.baseDir, id);
    const workdir = join(dir, 'work');
    const isolation = this.isolation;
    // Refusals (a secret lanes may not hand out, a mode the machine cannot do) come before anything is made.
    const env = this.sandboxEnv(spec, id, workdir, isolation);
    if (isolation === 'separate-uid') this.assertSeparateUid();
    await mkdir(workdir, { recursive: true });
    const agent = isolation === 'separate-uid' ? this.separateUid(id, dir, workdir) : undefined;

    const { command, args } = rootCommand(isolation, agent?.initCommand ?? this.initCommand, agent?.uid, this.agentMaxProcesses);
    const discard = async (): Promise<void> => {
      if (agent) releaseUid(this.baseDir, agent.uid, id);
      await bestEffort('remove failed sandbox dir', () => rm(dir, { recursive: true, force: true }), this.deps.onCleanupError);
    };
    const connectBy = performance.now() + connectTimeoutMs;
    const connectTimeout = (error: unknown): unknown => (error instanceof DeadlineExceeded ? new ConnectTimeoutError(this.name, connectTimeoutMs, id) : error);
    // Only a namespace's shell runs it; in a process group the variable would reach commands.
    const canary = isolation === 'process-group' ? undefined : startCanary(this.deps.newNonce());
    const started = this.spawner.start({ command, args, cwd: workdir, env: { ...env, ...agent?.env, ...(canary ? { [START_CANARY_ENV]: canary.line } : {}) } });
    let root: SandboxRoot;
    try {
      root = await withDeadline(started, connectTimeoutMs, options.signal);
    } catch (error) {
      // A root that starts after all has nobody to answer to: letting go of it ends it (lifeline EOF).
      void started.then(
        (late) => late.abandon(),
        () => undefined,
      );
      await discard();
      throw connectTimeout(error);
    }
    const stderrTail = collectTail(root);
    const record: SandboxRecord = {
      version: 1,
      id,
      tags: { ...spec.tags },
      image: spec.image,
      isolation,
      rootPid: root.pid,
      rootStartTime: readStat(root.pid)?.startTime ?? -1,
      ...ownerOf(process.pid),
      workdir,
      ...(agent ? { agentUid: agent.uid } : {}),
      createdAt: new Date(this.deps.now()).toISOString(),
    };
    const channel = new InitChannel(root.stdin, root.stdout);
    const canaryAnswered = canary ? awaitStartCanary(channel, canary, root.exited) : Promise.resolve(false);
    try {
      // Written before the first ping: a worker killed while connecting still leaves a reapable record.
      await writeRecord(this.baseDir, record);
      await withDeadline(firstPong(root, channel, stderrTail), Math.max(0, connectBy - performance.now()), options.signal);
      if (isolation !== 'process-group') await this.recordNamespaceInit(record);
    } catch (error) {
      channel.close();
      await bestEffort('reap failed sandbox', () => reapSandbox(record), this.deps.onCleanupError);
      await discard();
      throw connectTimeout(error);
    }
    // Its line comes long before the init's pong (a fork against a Node start); one that did not
    // come within the connect deadline only means the slot runs the canary itself.
    const passedCanaryAtCreate = await withDeadline(canaryAnswered, Math.max(0, connectBy - performance.now())).catch(() => false);

    const handle = new LocalSandbox({
      record,
      dir,
      channel,
      rootExited: root.exited,
      detachRoot: () => root.detach(),
      stderrTail,
      killGraceMs: this.killGraceMs,
      passedCanaryAtCreate,
      ...(agent ? { agentUid: agent.uid } : {}),
      maxOutputChars: this.maxOutputChars,
      now: this.deps.now,
      onCleanupError: this.deps.onCleanupError,
      onTerminated: (gone) => {
        this.handles.delete(gone);
        if (agent) releaseUid(this.baseDir, agent.uid, gone);
      },
    });
    this.handles.set(id, handle);
    return handle;
  }

  /**
   * Live sandboxes under `baseDir` whose tags match every given tag — including ones other processes
   * created. Along the way it removes the directories of sandboxes that ended with their creator
   * (root dead, creator gone, no process left): nobody can read them any more, and no one else
   * would clean them up.
   */
  async list(tags: Partial<SandboxTags> = {}): Promise<SandboxRef[]> {
    const records = await listRecords(this.baseDir);
    const live: SandboxRef[] = [];
    for (const r of records) {
      if (isAlive(r.rootPid, r.rootStartTime)) {
        const owner = ownerAlive(r);
        if (tagsMatch(r.tags, tags)) live.push({ id: r.id, tags: { ...r.tags }, pid: r.rootPid, ...(owner === undefined ? {} : { ownerAlive: owner }) });
      } else if (endedWithOwner(r)) {
        await bestEffort('remove sandbox dir left by a dead creator', () => rm(sandboxDir(this.baseDir, r.id), { recursive: true, force: true }), this.deps.onCleanupError);
      }
    }
    return live;
  }

  /** Kills the sandbox's processes and removes its directory. Unknown or already-gone ids succeed. */
  async terminateById(id: string): Promise<void> {
    const own = this.handles.get(id);
    if (own) return own.terminate();
    if (!isValidSandboxId(id)) return; // cannot name anything under baseDir, so nothing to end
    // No record (creator died between spawn and writing it) still finds processes by env marker.
    const record = await readRecord(this.baseDir, id);
    const target = record ?? { id };
    const survivors = await reapSandbox(target);
    if (survivors.length > 0) {
      throw new ProviderUnavailableError(this.name, `sandbox ${id}: processes survived SIGKILL: ${survivors.join(' ')}`);
    }
    await rm(sandboxDir(this.baseDir, id), { recursive: true, force: true });
    if (record?.agentUid !== undefined) releaseUid(this.baseDir, record.agentUid, id);
  }

  /** Stops talking to this process's sandboxes without ending them (they stay reapable by id, and still end when this process does). */
  async close(): Promise<void> {
    this.closed = true;
    for (const handle of this.handles.values()) handle.detach();
    this.handles.clear();
    this.spawner.close();
  }

  private sandboxEnv(spec: SandboxSpec, id: string, workdir: string, isolation: IsolationMode): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = {
      ...this.baseEnv,
      ...this.secrets(spec.secrets ?? []),
      ...spec.env,
      [SANDBOX_ID_ENV]: id,
      LANES_SANDBOX_WORKDIR: workdir,
      LANES_SANDBOX_LIFELINE_FD: String(LIFELINE_FD),
    };
    if (spec.timeoutMs !== undefined) env.LANES_SANDBOX_LIFETIME_MS = String(spec.timeoutMs);
    // The init may then end leftovers by signalling all it can see (kill -1): only the namespace's.
    // Never from a spec: in a process group, all it can see is the host.
    if (isolation === 'process-group') delete env.LANES_SANDBOX_OWN_PIDS;
    else env.LANES_SANDBOX_OWN_PIDS = '1';
    return env;
  }

  /**
   * A uid of the sandbox's own, its directories shaped for it, and the init copied where it can
   * read it. Refused when the machine cannot (explicit `separate-uid` on a machine without it).
   */
  private separateUid(id: string, dir: string, workdir: string): { uid: number; initCommand: readonly string[]; env: Record<string, string> } {
    const init = prepareBaseDir(this.baseDir);
    const uid = leaseUid(this.baseDir, id, (holder) => this.holderLive(holder));
    const { home, tmp } = prepareSandboxDirs(dir, workdir, uid);
    const initCommand = this.initCommand[1] === LOCAL_INIT_PATH ? [this.initCommand[0]!, init, ...this.initCommand.slice(2)] : this.initCommand;
    return { uid, initCommand, env: { HOME: home, TMPDIR: tmp } };
  }

  private assertSeparateUid(): void {
    const probe = probeSeparateUid(this.baseDir);
    if (!probe.ok) throw new ProviderInvalidError(this.name, `isolation separate-uid is not possible here: ${probe.why}`);
  }

  /** A lease's holder is live while its record names a root that still runs. */
  private holderLive(holder: string): boolean {
    if (this.handles.has(holder)) return true;
    const record = readRecordSync(this.baseDir, holder);
    return record !== undefined && isAlive(record.rootPid, record.rootStartTime);
  }

  /** A lane's mapped secrets: each a variable of the worker's environment, and never one of lanes' own. */
  private secrets(names: readonly string[]): Record<string, string> {
    const out: Record<string, string> = {};
    for (const name of names) {
      if (STACK_ENV_PATTERN.test(name)) throw new ProviderInvalidError(this.name, `secret ${name} is a credential of lanes itself and never reaches an agent`);
      const value = this.secretEnv[name];
      if (value === undefined) throw new ProviderInvalidError(this.name, `secret ${name} is not set in the worker's environment`);
      out[name] = value;
    }
    return out;
  }

  /** The namespace's pid 1 (unshare's only child): the sandbox is fully gone once it is. */
  private async recordNamespaceInit(record: SandboxRecord): Promise<void> {
    const [nsInitPid] = childrenOf(record.rootPid);
    const stat = nsInitPid === undefined ? undefined : readStat(nsInitPid);
    if (!stat) return;
    record.nsInitPid = stat.pid;
    record.nsInitStartTime = stat.startTime;
    await writeRecord(this.baseDir, record);
  }
}

/** Convenience factory: `createLocalProvider({ baseDir })`. */
export function createLocalProvider(options: LocalProviderOptions = {}): LocalSandboxProvider {
  return new LocalSandboxProvider(options);
}

/** Time-prefixed so a directory listing sorts by creation; random part avoids collisions across workers. */
export function newLocalSandboxId(): string {
  return `lsb-${Date.now().toString(36)}-${randomBytes(4).toString('hex')}`;
}

function tagsMatch(have: Partial<SandboxTags>, want: Partial<SandboxTags>): boolean {
  return Object.entries(want).every(([key, value]) => value === undefined || have[key as keyof SandboxTags] === value);
}

/** Resolves on the init's first pong; rejects if the root dies first. */
function firstPong(root: SandboxRoot, channel: InitChannel, stderrTail: () => string): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // After the pong this reject is a no-op: the promise has settled.
    void root.exited.then((code) => {
      const tail = stderrTail().trim();
      reject(new ProviderUnavailableError('local', `sandbox root exited with ${code} before answering${tail ? `: ${tail}` : ''}`));
    });
    const id = channel.request({ op: 'ping' }, (event) => {
      if (event.t !== 'pong') return;
      channel.forget(id);
      resolve();
    });
  });
}

function collectTail(root: SandboxRoot): () => string {
  let tail = '';
  root.stderr.setEncoding('utf8');
  root.stderr.on('data', (chunk: string) => {
    tail = (tail + chunk).slice(-STDERR_TAIL_CHARS);
  });
  return () => tail;
}
