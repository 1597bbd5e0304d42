import { posix } from 'node:path';
import { ProviderInvalidError } from '@lanes/contracts';
import type { ExecResult } from './provider.js';

/**
 * The reset as one command, for sandboxes whose files are only reachable through a process. The
 * paths are its arguments, never part of the script: how many only to remove, those (best effort:
 * an earlier card's leftover must not fail this card), then the ones to empty (see `resetDirsArgv`).
 */
export const RESET_DIRS_SCRIPT = 'r=$1; shift; while [ "$r" -gt 0 ]; do rm -rf -- "$1" || :; shift; r=$((r - 1)); done; [ "$#" -eq 0 ] || { rm -rf -- "$@" && mkdir -p -- "$@"; }';
/** argv[0] of that script, as `ps` shows it. */
export const RESET_DIRS_NAME = 'lanes-reset';

/**
 * The absolute, normalized paths a reset may touch: each must lie strictly inside `workdir` (a
 * relative one is taken from it), so a reset can never empty the workdir itself or anything
 * outside it. Throws ProviderInvalidError naming the first offender.
 */
export function resetTargets(provider: string, workdir: string, paths: readonly string[]): string[] {
  const root = posix.resolve('/', workdir);
  return paths.map((path) => {
    const target = posix.resolve(root, path);
    if (!target.startsWith(`${root === '/' ? '' : root}/`) || target === root) {
      throw new ProviderInvalidError(provider, `resetDirs: ${JSON.stringify(path)} is not inside the sandbox workdir ${root}`);
    }
    return target;
  });
}

/** The reset's argv for `exec` (paths from `resetTargets`): the removals first, then the targets. */
export function resetDirsArgv(targets: readonly string[], removals: readonly string[]): string[] {
  return ['sh', '-c', RESET_DIRS_SCRIPT, RESET_DIRS_NAME, String(removals.length), ...removals, ...targets];
}

/** A reset that did not start a process answers like one: exit 0, or 1 with the reason on stderr. */
export function resetResult(startedAtMs: number, nowMs: number, error?: unknown): ExecResult {
  const durationMs = nowMs - startedAtMs;
  if (error === undefined) return { exitCode: 0, stdout: '', stderr: '', timedOut: false, cancelled: false, durationMs };
  const message = error instanceof Error ? error.message : String(error);
  return { exitCode: 1, stdout: '', stderr: `${RESET_DIRS_NAME}: ${message}\n`, timedOut: false, cancelled: false, durationMs };
}
