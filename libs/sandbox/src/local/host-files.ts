import { closeSync, existsSync, fstatSync, mkdirSync, openSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { readFile, rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * A local sandbox's files are this host's files, touched from the worker's event loop. An async
 * `fs` call hands each system call to libuv's thread pool and back: two thread wake-ups that cost
 * the worker more than the call itself (about 50 µs each on a 2-core VM, against a few µs for the
 * call; bench/README.md). A card's reset, card file and result are a dozen such calls, so they are
 * made synchronously, as long as each is bounded: files up to SYNC_FILE_MAX_BYTES. A larger one (a
 * big result) goes the async way, so the event loop (lock renewals, heartbeats) never waits on it;
 * trees are only moved aside here (HostTrash), never removed.
 */
export const SYNC_FILE_MAX_BYTES = 1024 * 1024;

/** Writes the file; a missing parent directory is made. */
export async function writeHostFile(path: string, data: string | Uint8Array): Promise<void> {
  const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  const write = bytes <= SYNC_FILE_MAX_BYTES ? (p: string) => writeFileSync(p, data) : (p: string) => writeFile(p, data);
  try {
    await write(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    mkdirSync(dirname(path), { recursive: true });
    await write(path);
  }
}

/** The file's bytes; undefined when it (or a directory on its path) does not exist. */
export async function readHostFile(path: string): Promise<Buffer | undefined> {
  let fd: number;
  try {
    fd = openSync(path, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'ENOENT' || code === 'ENOTDIR') return undefined;
    throw error;
  }
  try {
    if (fstatSync(fd).size <= SYNC_FILE_MAX_BYTES) return readFileSync(fd);
  } finally {
    closeSync(fd);
  }
  return readFile(path);
}

/**
 * Moves trees out of the way at once: one rename into the sandbox's trash, which sits in the
 * sandbox's own directory (same file system, outside its workdir). The sandbox's init empties it in
 * the background (runtime/trash.mjs), so no removal ever runs on this event loop; the trash goes with
 * the sandbox's directory when the sandbox is terminated.
 */
export class HostTrash {
  private next = 0;

  constructor(private readonly dir: string) {}

  /** The path is free when this resolves (at once, but on another file system); a missing path is fine. */
  async discard(path: string): Promise<void> {
    const aside = join(this.dir, `${process.pid}-${this.next++}`);
    try {
      renameSync(path, aside);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT' && !existsSync(this.dir)) {
        mkdirSync(this.dir, { recursive: true });
        return this.discard(path);
      }
      if (code === 'ENOENT') return;
      if (code !== 'EXDEV') throw error;
      // A mount inside the workdir cannot be moved aside: removed where it is, as before.
      await rm(path, { recursive: true, force: true });
    }
  }
}
