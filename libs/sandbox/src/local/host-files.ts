import { chownSync, closeSync, constants, fchownSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';

/**
 * A local sandbox's files are this host's files, touched from the worker's event loop. An async
 * `fs` call hands each system call to libuv's thread pool and back: two thread wake-ups that cost
 * the worker more than the call itself (about 50 µs each on a 2-core VM, against a few µs for the
 * call; bench/README.md). A card's reset, card file and result are a dozen such calls, so they are
 * made synchronously, as long as each is bounded: files up to SYNC_FILE_MAX_BYTES, trees up to
 * SYNC_REMOVE_MAX_ENTRIES entries. Anything larger (a cloned repository, a big result) goes the
 * async way, so the event loop (lock renewals, heartbeats) never waits on it.
 */
export const SYNC_FILE_MAX_BYTES = 1024 * 1024;
export const SYNC_REMOVE_MAX_ENTRIES = 256;

/**
 * O_NOFOLLOW: a link an agent planted where lanes writes (a staging archive's name in the workdir)
 * must not carry the worker's write to a file of its choosing; the write fails instead (ELOOP).
 */
const WRITE_FLAGS = constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC | constants.O_NOFOLLOW;

/** Writes the file, never through a link; a missing parent directory is made. `owner`: the file is then given to that uid. */
export async function writeHostFile(path: string, data: string | Uint8Array, owner?: number): Promise<void> {
  const bytes = typeof data === 'string' ? Buffer.byteLength(data) : data.byteLength;
  const write = async (p: string): Promise<void> => {
    if (bytes > SYNC_FILE_MAX_BYTES) {
      const file = await open(p, WRITE_FLAGS, 0o644);
      try {
        if (owner !== undefined) await file.chown(owner, owner);
        await file.writeFile(data);
      } finally {
        await file.close();
      }
      return;
    }
    const fd = openSync(p, WRITE_FLAGS, 0o644);
    try {
      if (owner !== undefined) fchownSync(fd, owner, owner);
      writeFileSync(fd, data);
    } finally {
      closeSync(fd);
    }
  };
  try {
    await write(path);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    const first = mkdirSync(dirname(path), { recursive: true });
    // Directories made for the agent's file are the agent's too (a card's are shaped by its reset).
    if (owner !== undefined && first !== undefined) {
      for (let dir = dirname(path); dir.length >= first.length; dir = dirname(dir)) chownSync(dir, owner, owner);
    }
    await write(path);
  }
}

/**
 * Moves trees out of the way at once and removes them: a rename, then up to
 * SYNC_REMOVE_MAX_ENTRIES entries removed synchronously, and what is left in the background. The
 * trash sits in the sandbox's own directory (same file system, outside its workdir), so it goes
 * with the sandbox whatever happens to the background removal.
 */
export class HostTrash {
  private next = 0;
  private background: Promise<void> = Promise.resolve();

  constructor(
    private readonly dir: string,
    private readonly onError?: (label: string, error: unknown) => void,
  ) {}

  /** The path is free when this resolves (at once, but on another file system); a missing path is fine. */
  async discard(path: string): Promise<void> {
    mkdirSync(this.dir, { recursive: true });
    const aside = join(this.dir, `${process.pid}-${this.next++}`);
    try {
      renameSync(path, aside);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === 'ENOENT') return;
      if (code !== 'EXDEV') throw error;
      // A mount inside the workdir cannot be moved aside: removed where it is, as before.
      await rm(path, { recursive: true, force: true });
      return;
    }
    if (!removeBounded(aside, { left: SYNC_REMOVE_MAX_ENTRIES })) this.later(aside);
  }

  /** Resolves when every background removal so far has settled. */
  settled(): Promise<void> {
    return this.background;
  }

  private later(path: string): void {
    this.background = this.background.then(() => rm(path, { recursive: true, force: true }).catch((error: unknown) => this.onError?.('remove discarded tree', error)));
  }
}

/** Removes the tree if it has at most `budget.left` entries; false (part of it left) otherwise. */
function removeBounded(path: string, budget: { left: number }): boolean {
  // A link is removed, never followed: what it points at may be outside the sandbox.
  if (!lstatSync(path).isDirectory()) {
    unlinkSync(path);
    return true;
  }
  return removeDirBounded(path, budget);
}

function removeDirBounded(dir: string, budget: { left: number }): boolean {
  const entries = readdirSync(dir, { withFileTypes: true });
  if (entries.length > budget.left) return false;
  for (const entry of entries) {
    budget.left--;
    const child = join(dir, entry.name);
    // Entry types come from the directory itself (lstat's view): a link to a directory is a link.
    if (entry.isDirectory()) {
      if (!removeDirBounded(child, budget)) return false;
    } else unlinkSync(child);
  }
  rmdirSync(dir);
  return true;
}
