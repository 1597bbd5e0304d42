import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, closeSync, copyFileSync, mkdirSync, openSync, readFileSync, renameSync, statSync, unlinkSync, writeSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import { agentLimits } from '@lanes/contracts';

/**
 * `separate-uid` isolation: each local sandbox runs as an unprivileged uid of its own, in its own
 * PID namespace. What that uid can reach:
 * - its own HOME and TMPDIR (`<sandbox>/home`, `<sandbox>/tmp`, mode 0700) and each card's `out` and
 *   `work` directories (mode 0700);
 * - the workdir as /tmp is to everyone (root's, group = its uid, 1770): it may make its own files
 *   there (file sync, setup), but the sticky bit keeps it from renaming or replacing what lanes put
 *   there (`cards/`);
 * - the directories between the workdir and a card's `out`/`work` only to pass through (0710,
 *   group = its uid): no other uid, so no other slot, can enter them, and it cannot rename or
 *   replace them, so nothing lanes reads or writes there can be swapped for a link;
 * - files others may read (the programs on PATH, world-readable files), as any unprivileged user.
 * It cannot see the worker or other slots in /proc (its own PID namespace and /proc), signal them,
 * or write into lanes' own files (owned by the worker's uid).
 */

/** Agent uids are taken from [base, base + count): far above any system or login uid (Debian: < 60000), and never in /etc/passwd. */
export const DEFAULT_AGENT_UID_BASE = 200_000;
export const AGENT_UID_COUNT = 100_000;
/** Probing the uid switch starts node once; a hung probe must not hang provider construction. */
const PROBE_TIMEOUT_MS = 10_000;
/** Inside `<baseDir>`: leases of agent uids, one file per uid holding the sandbox id. */
const LEASE_DIR = '.uids';
/** Inside `<baseDir>`: the init and its modules, copied where every agent uid can read them. */
const RUNTIME_DIR = '.runtime';
const RUNTIME_FILES = ['local-init.mjs', 'kill-escalation.mjs', 'proc.mjs'] as const;
const SOURCE_RUNTIME_DIR = fileURLToPath(new URL('../../runtime/', import.meta.url));

export type SeparateUidProbe = { ok: true } | { ok: false; why: string };

const probes = new Map<string, SeparateUidProbe>();

/**
 * Whether sandboxes under `baseDir` can run as uids of their own, and if not, why (said at boot
 * and in GET /v1/lanes). Needs root (to set uids), `setpriv`, every directory above `baseDir`
 * passable by others, and `execPath` runnable by an unprivileged uid. Probed once per directory.
 */
export function probeSeparateUid(baseDir: string, execPath: string = process.execPath): SeparateUidProbe {
  const key = `${baseDir}\0${execPath}`;
  let probe = probes.get(key);
  if (!probe) probes.set(key, (probe = runProbe(baseDir, execPath)));
  return probe;
}

function runProbe(baseDir: string, execPath: string): SeparateUidProbe {
  if (process.getuid?.() !== 0) return { ok: false, why: 'the worker is not root, so it cannot run agents as uids of their own' };
  const closed = closedAncestor(baseDir);
  if (closed) return { ok: false, why: `${closed} is not passable by other users (needs o+x), so agent uids cannot reach their sandboxes under ${baseDir}` };
  const uid = DEFAULT_AGENT_UID_BASE + AGENT_UID_COUNT - 1;
  // Through /bin/sh, as the sandbox root starts the init: setpriv's own exec still holds root's
  // capabilities (a node under a root-only directory runs), while the program it starts has none.
  // prlimit first, as a root starts: without it no agent's processes could be capped.
  const [prlimit, ...limit] = nprocArgs(agentLimits.SANDBOX_MAX_PROCESSES);
  const run = spawnSync(prlimit!, [...limit, 'setpriv', ...setprivArgs(uid), '--', '/bin/sh', '-c', 'exec "$0" -e 0', execPath], {
    stdio: ['ignore', 'ignore', 'pipe'],
    encoding: 'utf8',
    timeout: PROBE_TIMEOUT_MS,
  });
  if (run.error) return { ok: false, why: `prlimit could not run (${run.error.message})` };
  if (run.status !== 0) {
    // prlimit or setpriv says why it could not go on (setpriv missing, say); a node that will not run says nothing.
    const said = run.stderr.trim().split('\n').at(-1);
    return {
      ok: false,
      why: `${execPath} does not run as an unprivileged uid (exit ${run.status ?? run.signal}${said ? `: ${said}` : ''}): is it under a directory only root may enter?`,
    };
  }
  return { ok: true };
}

/** The first directory from `/` down to `dir`'s parent that others may not pass through (no o+x). */
function closedAncestor(dir: string): string | undefined {
  let current = dirname(dir);
  const chain: string[] = [];
  while (true) {
    chain.unshift(current);
    const up = dirname(current);
    if (up === current) break;
    current = up;
  }
  for (const d of chain) {
    const mode = statSync(d, { throwIfNoEntry: false })?.mode;
    if (mode !== undefined && (mode & 0o001) === 0) return d;
  }
  return undefined;
}

/** `prlimit` setting RLIMIT_NPROC (soft and hard) for what it then runs. */
export function nprocArgs(maxProcesses: number): string[] {
  return ['prlimit', `--nproc=${maxProcesses}`, '--'];
}

/** setpriv's arguments that drop to `uid`: its own group, no supplementary groups, no way back up through setuid programs. */
export function setprivArgs(uid: number): string[] {
  return [`--reuid=${uid}`, `--regid=${uid}`, '--clear-groups', '--no-new-privs'];
}

/** Makes `baseDir` passable by agent uids (0711: they may enter their own sandbox, never list the others) and the init readable to them. Returns the init's path. */
export function prepareBaseDir(baseDir: string): string {
  mkdirSync(baseDir, { recursive: true });
  chmodSync(baseDir, 0o711);
  const runtime = join(baseDir, RUNTIME_DIR);
  mkdirSync(runtime, { recursive: true, mode: 0o755 });
  chmodSync(runtime, 0o755);
  for (const file of RUNTIME_FILES) {
    const target = join(runtime, file);
    copyFileSync(join(SOURCE_RUNTIME_DIR, file), `${target}.${process.pid}.tmp`);
    chmodSync(`${target}.${process.pid}.tmp`, 0o644);
    // Renamed over: a sandbox starting from the old copy keeps the file it opened.
    renameSync(`${target}.${process.pid}.tmp`, target);
  }
  return join(runtime, 'local-init.mjs');
}

/**
 * Takes a free agent uid for sandbox `id`: an exclusive lease file under `<baseDir>/.uids`. A lease
 * whose sandbox has no live root any more (`isLive(holder)` false) is taken over: its sandbox is gone.
 */
export function leaseUid(baseDir: string, id: string, isLive: (holderId: string) => boolean, random: () => number = Math.random): number {
  const dir = join(baseDir, LEASE_DIR);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const start = Math.floor(random() * AGENT_UID_COUNT);
  for (let i = 0; i < AGENT_UID_COUNT; i++) {
    const uid = DEFAULT_AGENT_UID_BASE + ((start + i) % AGENT_UID_COUNT);
    const path = join(dir, String(uid));
    if (tryCreate(path, id)) return uid;
    const holder = readLease(path);
    if (holder !== undefined && !isLive(holder)) {
      unlinkSync(path);
      if (tryCreate(path, id)) return uid;
    }
  }
  throw new RangeError(`no free agent uid under ${dir}`);
}

export function releaseUid(baseDir: string, uid: number, id: string): void {
  const path = join(baseDir, LEASE_DIR, String(uid));
  if (readLease(path) === id) unlinkSync(path);
}

function tryCreate(path: string, id: string): boolean {
  let fd: number;
  try {
    fd = openSync(path, 'wx', 0o600);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw error;
  }
  try {
    writeSync(fd, id);
  } finally {
    closeSync(fd);
  }
  return true;
}

function readLease(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return undefined;
  }
}

/**
 * Lays out a new sandbox for `uid`: `<dir>` 0711 (lanes' record stays root's), the workdir 1770
 * root:uid (the agent's alone to write in, and lanes' entries there stay lanes'), and its own HOME
 * and TMPDIR, 0700.
 */
export function prepareSandboxDirs(dir: string, workdir: string, uid: number): { home: string; tmp: string } {
  chmodSync(dir, 0o711);
  chownSync(workdir, 0, uid);
  chmodSync(workdir, 0o1770);
  const home = join(dir, 'home');
  const tmp = join(dir, 'tmp');
  for (const own of [home, tmp]) {
    mkdirSync(own, { recursive: true });
    shapeOwned(own, uid);
  }
  return { home, tmp };
}

/**
 * After a card's directories are made: each target (`out`, `work`) belongs to the agent (0700),
 * and every directory between the workdir and it is root's, passable by the agent alone (0710).
 */
export function shapeCardDirs(workdir: string, targets: readonly string[], uid: number): void {
  for (const target of targets) {
    const parts = relative(workdir, target).split(sep);
    let current = workdir;
    for (const part of parts.slice(0, -1)) {
      current = join(current, part);
      shapePassage(current, uid);
    }
    shapeOwned(target, uid);
  }
}

function shapePassage(path: string, uid: number): void {
  chownSync(path, 0, uid);
  chmodSync(path, 0o710);
}

function shapeOwned(path: string, uid: number): void {
  chownSync(path, uid, uid);
  chmodSync(path, 0o700);
}
