import { spawn, type ChildProcess } from 'node:child_process';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { ProviderUnavailableError } from '@lanes/contracts';
import { exitCodeOf } from '../exec-result.js';
import { isAlive, readStat } from '../proc.js';
import { LIFELINE_FD } from './isolation.js';
import { ROOT_STDIO, type RootRequest, type RootSpawner, type SandboxRoot } from './sandbox-root.js';

/** Resolved from this module so it works from src/ (tsx, vitest) and dist/ alike. */
export const ROOT_SPAWNER_PATH = fileURLToPath(new URL('../../runtime/root-spawner.mjs', import.meta.url));
/**
 * Once the spawner is gone, nobody relays its roots' exits: each is watched in /proc this often
 * instead. A dead root is also found by the supervisor's probe, so this only has to be prompt.
 */
export const ORPHAN_POLL_MS = 1_000;
/** Enough spawner stderr to explain its crash. */
const STDERR_TAIL_CHARS = 4_096;

type SpawnerMessage =
  | { t: 'spawned'; id: number; pid: number }
  | { t: 'fd'; id: number; fd: number }
  | { t: 'failed'; id: number; message: string }
  | { t: 'exit'; id: number; code: number | null; signal: NodeJS.Signals | null };

interface Starting {
  request: RootRequest;
  /** The spawner it was sent to: when that one dies, the start is sent once more, to another. */
  spawner: ChildProcess;
  retried: boolean;
  resolve: (root: SandboxRoot) => void;
  reject: (error: Error) => void;
  pid?: number;
  exited?: Promise<number>;
  sockets: Socket[];
}

interface Running {
  spawner: ChildProcess;
  pid: number;
  startTime: number | undefined;
  resolveExit: (code: number) => void;
  /** Keeps this process alive until the root exits, as a child process would; detach and abandon let go. */
  held: boolean;
}

export interface SpawnerProcessOptions {
  /** argv of the spawner. Default `[process.execPath, ROOT_SPAWNER_PATH]`. */
  command?: readonly string[];
  orphanPollMs?: number;
}

/**
 * Roots started by a small process of this one's (runtime/root-spawner.mjs), which hands each root's
 * stdio and lifeline back over IPC and relays its exit. This process never forks for a sandbox: a
 * fork here costs in proportion to the worker's memory, and holds its event loop while it runs.
 *
 * The spawner starts with the first root and ends with this process (its channel closes) or at
 * close(). It neither keeps this process alive nor holds anything a sandbox needs: if it dies, the
 * roots it started live on, watched in /proc (ORPHAN_POLL_MS), and the next start launches another.
 */
export class SpawnerProcess implements RootSpawner {
  private child: ChildProcess | undefined;
  private stderrTail = '';
  private nextId = 1;
  private readonly starting = new Map<number, Starting>();
  private readonly running = new Map<number, Running>();
  private readonly command: readonly string[];
  private readonly orphanPollMs: number;

  constructor(options: SpawnerProcessOptions = {}) {
    this.command = options.command ?? [process.execPath, ROOT_SPAWNER_PATH];
    this.orphanPollMs = options.orphanPollMs ?? ORPHAN_POLL_MS;
  }

  start(request: RootRequest): Promise<SandboxRoot> {
    return new Promise<SandboxRoot>((resolve, reject) => {
      this.send({ request, retried: false, resolve, reject, spawner: this.spawner(), sockets: [] });
    });
  }

  close(): void {
    const child = this.child;
    this.child = undefined;
    this.running.clear();
    for (const id of [...this.starting.keys()]) this.fail(id, new ProviderUnavailableError('local', 'the local provider closed while a sandbox root started'));
    if (child?.connected) child.disconnect();
  }

  /** The spawner to send to: the one up, or a new one when it is gone (or going: its channel closed). */
  private spawner(): ChildProcess {
    return this.child?.connected ? this.child : this.launch();
  }

  private send(starting: Starting): void {
    const id = this.nextId;
    this.nextId += 1;
    this.starting.set(id, starting);
    this.refresh();
    const { command, args, cwd, env } = starting.request;
    starting.spawner.send({ op: 'spawn', id, command, args, cwd, env }, undefined, undefined, (error) => {
      if (error) this.onSendFailed(id, starting.spawner, error);
    });
  }

  /**
   * A write to a spawner failed: it died before this process saw its exit (EPIPE), or its channel
   * closed. It takes no later start, and this one is sent once more, as if it had died with it.
   */
  private onSendFailed(id: number, child: ChildProcess, error: Error): void {
    if (this.child === child) {
      this.child = undefined;
      if (child.connected) child.disconnect();
    }
    this.resend(id, `cannot reach the root spawner: ${error.message}`, error);
  }

  /** A start whose spawner is gone: sent once more, to another; a second loss fails it. */
  private resend(id: number, why: string, cause?: Error): void {
    const starting = this.starting.get(id);
    if (!starting) return;
    if (starting.retried) {
      this.fail(id, new ProviderUnavailableError('local', why, cause ? { cause } : undefined));
      return;
    }
    this.drop(id);
    this.send({ ...starting, retried: true, spawner: this.spawner(), sockets: [], pid: undefined, exited: undefined });
  }

  private launch(): ChildProcess {
    const [command, ...args] = this.command;
    // No environment of the stack's: every root gets its own from the request.
    const child = spawn(command!, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: {}, serialization: 'json' });
    this.child = child;
    this.stderrTail = '';
    child.unref();
    child.channel?.unref();
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (chunk: string) => {
      this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL_CHARS);
    });
    (child.stderr as Socket | null)?.unref();
    child.on('message', (message: SpawnerMessage, handle?: Socket) => this.onMessage(message, handle));
    // 'error' alone when it could not start; 'exit' when it did.
    child.once('error', (error) => {
      if (child.pid === undefined) this.onGone(child, `cannot start the root spawner: ${error.message}`);
    });
    child.once('exit', (code, signal) => this.onGone(child, `the root spawner exited with ${exitCodeOf(code, signal)}`));
    return child;
  }

  private onMessage(message: SpawnerMessage, handle: Socket | undefined): void {
    switch (message.t) {
      case 'spawned':
        this.onSpawned(message.id, message.pid);
        return;
      case 'fd':
        this.onSocket(message.id, message.fd, handle);
        return;
      case 'failed':
        this.fail(message.id, new ProviderUnavailableError('local', `cannot start sandbox root: ${message.message}`));
        return;
      case 'exit':
        this.running.get(message.id)?.resolveExit(exitCodeOf(message.code, message.signal));
        this.running.delete(message.id);
        this.refresh();
    }
  }

  private onSpawned(id: number, pid: number): void {
    const starting = this.starting.get(id);
    if (!starting) return;
    starting.pid = pid;
    starting.exited = new Promise<number>((resolveExit) => {
      this.running.set(id, { spawner: starting.spawner, pid, startTime: readStat(pid)?.startTime, resolveExit, held: true });
    });
  }

  private onSocket(id: number, fd: number, socket: Socket | undefined): void {
    const starting = this.starting.get(id);
    if (!socket) {
      this.fail(id, new ProviderUnavailableError('local', `the root spawner sent no handle for fd ${fd}`));
      return;
    }
    if (!starting) {
      socket.destroy();
      return;
    }
    // The root's death is observed through its exit; a reset pipe adds nothing (and must not throw).
    socket.on('error', () => undefined);
    starting.sockets[fd] = socket;
    if (starting.sockets.filter(Boolean).length < ROOT_STDIO.length) return;
    this.starting.delete(id);
    const sockets = starting.sockets;
    const [stdin, stdout, stderr] = sockets as [Socket, Socket, Socket];
    // Never written, never read: it must not keep this process alive, only die with it.
    sockets[LIFELINE_FD]!.unref();
    starting.resolve({
      pid: starting.pid!,
      stdin,
      stdout,
      stderr,
      exited: starting.exited!,
      // Neither stops the exit's relay; both stop it keeping this process alive.
      detach: () => {
        stdout.destroy();
        stderr.destroy();
        this.letGo(id);
      },
      abandon: () => {
        for (const socket of sockets) socket.destroy();
        this.letGo(id);
      },
    });
  }

  private fail(id: number, error: Error): void {
    const starting = this.drop(id);
    if (!starting) return;
    this.refresh();
    starting.reject(error);
  }

  /** Takes a start off the books, and ends any root it had started. */
  private drop(id: number): Starting | undefined {
    const starting = this.starting.get(id);
    if (!starting) return undefined;
    this.starting.delete(id);
    this.running.delete(id);
    // The spawner closed its copies as it sent them: destroying ours ends the root (lifeline EOF).
    for (const socket of starting.sockets) socket?.destroy();
    return starting;
  }

  /**
   * A spawner is gone. Its starts under way are sent once more, to another (a root it had started
   * ends with it: its lifeline closed with it); a second loss fails them. The roots it started live
   * on, watched in /proc.
   */
  private onGone(child: ChildProcess, why: string): void {
    if (this.child === child) this.child = undefined;
    const tail = this.stderrTail.trim();
    for (const [id, starting] of [...this.starting]) if (starting.spawner === child) this.resend(id, `${why}${tail ? `: ${tail}` : ''}`);
    for (const [id, root] of this.running) if (root.spawner === child) this.watchOrphan(id, root);
  }

  private watchOrphan(id: number, root: Running): void {
    const timer = setInterval(() => {
      const watched = this.running.get(id) === root;
      if (watched && isAlive(root.pid, root.startTime)) return;
      clearInterval(timer);
      if (!watched) return;
      this.running.delete(id);
      root.resolveExit(exitCodeOf(null, null));
      this.refresh();
    }, this.orphanPollMs);
    timer.unref();
  }

  private letGo(id: number): void {
    const root = this.running.get(id);
    if (root) root.held = false;
    this.refresh();
  }

  /** The channel keeps this process alive while a start is under way or a held root runs; an idle spawner does not. */
  private refresh(): void {
    const busy = this.starting.size > 0 || [...this.running.values()].some((root) => root.held);
    if (busy) this.child?.channel?.ref();
    else this.child?.channel?.unref();
  }
}
