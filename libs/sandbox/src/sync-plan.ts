import { lstat, readdir, readlink, stat } from 'node:fs/promises';
import { join, posix, resolve } from 'node:path';
import type { FileSync } from '@lanes/contracts';
import { ConfigError } from '@lanes/contracts';
import { TAR_TRAILER_BYTES, tarEntryBytes } from './tar-writer.js';

/** One thing to create in the sandbox. `dest` is an absolute sandbox path. */
export type SyncEntry =
  | { type: 'file'; hostPath: string; dest: string; mode: number; mtimeMs: number; size: number }
  | { type: 'directory'; dest: string; mode: number; mtimeMs: number }
  | { type: 'symlink'; dest: string; mode: number; mtimeMs: number; target: string };

export interface BatchLimits {
  /** Entries (files, directories, links) per batch. */
  maxFilesPerBatch: number;
  /** Archive bytes per batch; a single larger file still goes, alone in its batch. */
  maxBatchBytes: number;
}

/**
 * Expands `files` into entries, walking directory trees. `from` is relative to `baseDir` (a top-level
 * symlink is followed; links inside a tree are copied as links). A relative `to` is relative to
 * `workdir`. A missing source is a configuration error: no retry will make it appear.
 */
export async function collectEntries(files: readonly FileSync[], baseDir: string, workdir: string): Promise<SyncEntry[]> {
  const entries: SyncEntry[] = [];
  for (const [index, file] of files.entries()) {
    const source = resolve(baseDir, file.from);
    const dest = posix.resolve(workdir, file.to);
    if (dest === '/') throw new ConfigError([{ path: `files.${index}.to`, message: 'must not be the sandbox root' }], 'file sync');
    let info;
    try {
      info = await stat(source);
    } catch (error) {
      const detail = (error as NodeJS.ErrnoException).code ?? String(error);
      throw new ConfigError([{ path: `files.${index}.from`, message: `cannot read ${source}: ${detail}` }], 'file sync');
    }
    if (info.isDirectory()) {
      entries.push({ type: 'directory', dest, mode: info.mode, mtimeMs: info.mtimeMs });
      await walk(source, dest, entries);
    } else if (info.isFile()) {
      entries.push({ type: 'file', hostPath: source, dest, mode: info.mode, mtimeMs: info.mtimeMs, size: info.size });
    }
  }
  return entries;
}

async function walk(hostDir: string, destDir: string, into: SyncEntry[]): Promise<void> {
  const children = (await readdir(hostDir, { withFileTypes: true })).sort((a, b) => (a.name < b.name ? -1 : 1));
  for (const child of children) {
    const hostPath = join(hostDir, child.name);
    const dest = posix.join(destDir, child.name);
    if (child.isDirectory()) {
      const info = await lstat(hostPath);
      into.push({ type: 'directory', dest, mode: info.mode, mtimeMs: info.mtimeMs });
      await walk(hostPath, dest, into);
    } else if (child.isFile()) {
      const info = await lstat(hostPath);
      into.push({ type: 'file', hostPath, dest, mode: info.mode, mtimeMs: info.mtimeMs, size: info.size });
    } else if (child.isSymbolicLink()) {
      const info = await lstat(hostPath);
      into.push({ type: 'symlink', dest, mode: info.mode, mtimeMs: info.mtimeMs, target: await readlink(hostPath) });
    }
    // Sockets, fifos and devices have no meaning in another machine's sandbox: skipped.
  }
}

/** Splits entries into batches, in order, each within both limits. */
export function planBatches(entries: readonly SyncEntry[], limits: BatchLimits): SyncEntry[][] {
  const batches: SyncEntry[][] = [];
  let current: SyncEntry[] = [];
  let currentBytes = TAR_TRAILER_BYTES;
  for (const entry of entries) {
    const bytes = tarEntryBytes(archivePath(entry), entry.type === 'file' ? entry.size : 0, entry.type === 'symlink' ? entry.target : '');
    const full = current.length >= limits.maxFilesPerBatch || (current.length > 0 && currentBytes + bytes > limits.maxBatchBytes);
    if (full) {
      batches.push(current);
      current = [];
      currentBytes = TAR_TRAILER_BYTES;
    }
    current.push(entry);
    currentBytes += bytes;
  }
  if (current.length > 0) batches.push(current);
  return batches;
}

/** Paths inside the archive are relative to `/` (extracted with `-C /`). */
export function archivePath(entry: SyncEntry): string {
  return entry.dest.replace(/^\/+/, '');
}
