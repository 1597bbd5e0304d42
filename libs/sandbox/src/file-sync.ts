import { randomBytes } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { posix } from 'node:path';
import type { FileSync } from '@lanes/contracts';
import { ProviderUnavailableError, SandboxGoneError, SyncBatchError, defaults } from '@lanes/contracts';
import { DeadlineExceeded, withDeadline } from './deadline.js';
import type { SandboxHandle } from './provider.js';
import { archivePath, collectEntries, planBatches, type SyncEntry } from './sync-plan.js';
import { buildTar, type TarEntry } from './tar-writer.js';

/**
 * Argv budget for any command file sync runs. Linux ARG_MAX is usually 2 MiB (a quarter of the
 * stack limit) and includes the environment; 64 KiB leaves room for any sane environment.
 */
export const DEFAULT_SYNC_MAX_ARG_BYTES = 64 * 1024;
/** Entries per batch: keeps one batch's archive and its unpack time well inside the batch deadline. */
export const DEFAULT_SYNC_MAX_FILES_PER_BATCH = 1_000;
/** Archive bytes per batch: one upload stays small enough for a remote provider's file API. */
export const DEFAULT_SYNC_MAX_BATCH_BYTES = 8 * 1024 * 1024;
/** Host files read at once while building an archive: far below the usual 1024 open-file limit. */
const READ_CONCURRENCY = 32;
const STDERR_IN_ERROR_CHARS = 1_000;

/** What file sync needs from a sandbox: any provider's handle will do. */
export type SyncTarget = Pick<SandboxHandle, 'workdir' | 'exec' | 'writeFile'>;

export interface SyncProgress {
  /** 1-based number of the batch that just completed. */
  batch: number;
  batches: number;
  /** Entries synced so far, and in total. */
  entries: number;
  totalEntries: number;
}

export interface SyncFilesOptions {
  /** Host directory that every `from` is relative to. */
  baseDir: string;
  /** Default DEFAULT_SYNC_MAX_FILES_PER_BATCH (1000). */
  maxFilesPerBatch?: number;
  /** Default DEFAULT_SYNC_MAX_BATCH_BYTES (8 MiB). */
  maxBatchBytes?: number;
  /** Upper bound on any exec's argv, in bytes. Default DEFAULT_SYNC_MAX_ARG_BYTES (64 KiB). */
  maxArgBytes?: number;
  /** Deadline of each batch, upload and unpack together. Default DEFAULT_SYNC_BATCH_TIMEOUT_MS. */
  batchTimeoutMs?: number;
  /** Sandbox directory where batch archives are staged (and removed). Default the handle's workdir. */
  stagingDir?: string;
  onProgress?: (progress: SyncProgress) => void;
  signal?: AbortSignal;
}

export interface SyncSummary {
  batches: number;
  entries: number;
  /** Archive bytes uploaded. */
  bytes: number;
}

/**
 * Copies host files and directory trees into a sandbox (DESIGN.md failure 5).
 *
 * Each batch is one tar archive written with `writeFile` and unpacked by one `exec`; file paths
 * travel inside the archive, never in argv, so the argument limit cannot be hit however many or
 * however long the paths are (the fixed unpack argv is still checked against `maxArgBytes`).
 * Batches are bounded by entry count and archive bytes. Every batch's exit code is checked and every
 * batch has its own deadline; a failing batch throws `SyncBatchError` naming it. `SandboxGoneError`
 * and `ProviderUnavailableError` pass through unwrapped, because they say what happened to the
 * sandbox rather than to the batch. Re-running is safe: extraction overwrites what is there.
 */
export async function syncFiles(target: SyncTarget, files: readonly FileSync[], options: SyncFilesOptions): Promise<SyncSummary> {
  const limits = {
    maxFilesPerBatch: positive('maxFilesPerBatch', options.maxFilesPerBatch ?? DEFAULT_SYNC_MAX_FILES_PER_BATCH),
    maxBatchBytes: positive('maxBatchBytes', options.maxBatchBytes ?? DEFAULT_SYNC_MAX_BATCH_BYTES),
  };
  const maxArgBytes = positive('maxArgBytes', options.maxArgBytes ?? DEFAULT_SYNC_MAX_ARG_BYTES);
  const batchTimeoutMs = positive('batchTimeoutMs', options.batchTimeoutMs ?? defaults.DEFAULT_SYNC_BATCH_TIMEOUT_MS);
  const entries = await collectEntries(files, options.baseDir, target.workdir);
  const batches = planBatches(entries, limits);
  const stagingDir = options.stagingDir ?? target.workdir;
  const runId = randomBytes(6).toString('hex');
  let done = 0;
  let bytes = 0;
  for (const [index, batch] of batches.entries()) {
    const number = index + 1;
    const archive = buildTar(await toTarEntries(batch));
    const stagingPath = posix.join(stagingDir, `.lanes-sync-${runId}-${number}.tar`);
    await runBatch(target, { number, of: batches.length, archive, stagingPath, batchTimeoutMs, maxArgBytes, signal: options.signal });
    done += batch.length;
    bytes += archive.byteLength;
    options.onProgress?.({ batch: number, batches: batches.length, entries: done, totalEntries: entries.length });
  }
  return { batches: batches.length, entries: entries.length, bytes };
}

interface BatchRun {
  number: number;
  of: number;
  archive: Uint8Array;
  stagingPath: string;
  batchTimeoutMs: number;
  maxArgBytes: number;
  signal: AbortSignal | undefined;
}

/** The archive is removed whether or not extraction worked; tar's own status is what is reported. */
const UNPACK_SCRIPT = 'tar -x -o -f "$1" -C /; status=$?; rm -f "$1"; exit $status';

export function unpackArgv(stagingPath: string): string[] {
  return ['sh', '-c', UNPACK_SCRIPT, 'lanes-sync', stagingPath];
}

async function runBatch(target: SyncTarget, run: BatchRun): Promise<void> {
  const { number, of, batchTimeoutMs, signal } = run;
  const argv = unpackArgv(run.stagingPath);
  const argBytes = argv.reduce((sum, arg) => sum + Buffer.byteLength(arg) + 1, 0);
  if (argBytes > run.maxArgBytes) throw new SyncBatchError(number, of, `unpack argv is ${argBytes} bytes, over the ${run.maxArgBytes} byte budget`);
  const startedAtMs = Date.now();
  try {
    await withDeadline(target.writeFile(run.stagingPath, run.archive), batchTimeoutMs, signal);
    const remainingMs = batchTimeoutMs - (Date.now() - startedAtMs);
    if (remainingMs <= 0) throw new DeadlineExceeded(batchTimeoutMs);
    const result = await target.exec(argv, { timeoutMs: remainingMs, signal });
    if (result.timedOut) throw new DeadlineExceeded(batchTimeoutMs);
    if (result.cancelled) throw new SyncBatchError(number, of, 'cancelled');
    if (result.exitCode !== 0) {
      const stderr = result.stderr.trim().slice(0, STDERR_IN_ERROR_CHARS);
      throw new SyncBatchError(number, of, `unpack exited with ${result.exitCode}${stderr ? `: ${stderr}` : ''}`);
    }
  } catch (error) {
    if (error instanceof SyncBatchError || error instanceof SandboxGoneError || error instanceof ProviderUnavailableError) throw error;
    if (error instanceof DeadlineExceeded) throw new SyncBatchError(number, of, `missed its ${batchTimeoutMs} ms deadline`);
    if (signal?.aborted) throw new SyncBatchError(number, of, 'cancelled', { cause: error });
    throw new SyncBatchError(number, of, error instanceof Error ? error.message : String(error), { cause: error });
  }
}

async function toTarEntries(batch: readonly SyncEntry[]): Promise<TarEntry[]> {
  const out: TarEntry[] = new Array(batch.length);
  for (let start = 0; start < batch.length; start += READ_CONCURRENCY) {
    await Promise.all(
      batch.slice(start, start + READ_CONCURRENCY).map(async (entry, offset) => {
        const path = archivePath(entry);
        const common = { path, mode: entry.mode, mtimeMs: entry.mtimeMs };
        out[start + offset] =
          entry.type === 'file'
            ? { type: 'file', ...common, data: await readFile(entry.hostPath) }
            : entry.type === 'symlink'
              ? { type: 'symlink', ...common, target: entry.target }
              : { type: 'directory', ...common };
      }),
    );
  }
  return out;
}

function positive(name: string, value: number): number {
  if (!(Number.isFinite(value) && value > 0)) throw new RangeError(`syncFiles: ${name} must be a positive number, got ${value}`);
  return value;
}
