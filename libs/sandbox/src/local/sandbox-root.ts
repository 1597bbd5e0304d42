import { spawn } from 'node:child_process';
import { once } from 'node:events';
import type { Readable, Writable } from 'node:stream';
import { ProviderUnavailableError } from '@lanes/contracts';
import { exitCodeOf } from '../exec-result.js';
import { LIFELINE_FD } from './isolation.js';

/** The argv, directory and environment a sandbox root starts with (isolation.ts's rootCommand). */
export interface RootRequest {
  command: string;
  args: readonly string[];
  cwd: string;
  env: NodeJS.ProcessEnv;
}

/**
 * A started sandbox root, as this process holds it: the init's channel (stdin, stdout), its stderr,
 * and its exit. This process alone holds the other end of the root's lifeline (LIFELINE_FD), so
 * the root ends when this process does, however it ends.
 */
export interface SandboxRoot {
  readonly pid: number;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** Resolves with the exit code (128+signal when signalled) once the root is gone. */
  readonly exited: Promise<number>;
  /** Stops this process's ties to the root (its output, its ref) without killing it. */
  detach(): void;
  /** Lets go of every tie, the lifeline too: the root ends itself (a root nobody waits for any more). */
  abandon(): void;
}

/** Starts sandbox roots; rejects with ProviderUnavailableError when one cannot start. */
export interface RootSpawner {
  start(request: RootRequest): Promise<SandboxRoot>;
  /** Lets go of the spawner's own resources; roots already started are not touched. */
  close(): void;
}

/** The stdio a root gets: the init's channel and stderr, then the lifeline. */
export const ROOT_STDIO = ['pipe', 'pipe', 'pipe', 'pipe'] as const;

/**
 * Roots forked by this process itself. Each fork costs in proportion to this process's memory
 * (root-spawner.ts starts them from a small process instead); kept for a machine where that
 * process cannot run, and as the baseline its benefit is measured against.
 */
export function inProcessSpawner(): RootSpawner {
  return {
    async start(request) {
      const root = spawn(request.command, [...request.args], {
        cwd: request.cwd,
        env: request.env,
        // Own process group, no controlling terminal: a ^C aimed at the worker must not reach it.
        detached: true,
        stdio: [...ROOT_STDIO],
      });
      if (root.pid === undefined) {
        const [error] = (await once(root, 'error')) as [Error];
        throw new ProviderUnavailableError('local', `cannot start sandbox root: ${error.message}`, { cause: error });
      }
      // Never written, never read: it must not keep this process alive, only die with it.
      (root.stdio[LIFELINE_FD] as { unref?: () => void } | null)?.unref?.();
      const exited = new Promise<number>((resolve) => {
        root.once('exit', (code, signal) => resolve(exitCodeOf(code, signal)));
      });
      return {
        pid: root.pid,
        stdin: root.stdin!,
        stdout: root.stdout!,
        stderr: root.stderr!,
        exited,
        detach: () => {
          root.stdout?.destroy();
          root.stderr?.destroy();
          root.unref();
        },
        abandon: () => {
          for (const stream of root.stdio) stream?.destroy();
          root.unref();
        },
      };
    },
    close() {},
  };
}
