import { closeSync, constants, fstatSync, lstatSync, openSync, readSync, type Stats } from 'node:fs';
import { AgentFileError, formatBytes } from '@lanes/contracts';

/**
 * O_NOFOLLOW: a link in the last component fails with ELOOP instead of being followed (the agent's
 * `ln -s /dev/zero result.json`, or a link to the worker's own /proc/self/environ).
 * O_NONBLOCK: opening a FIFO returns at once instead of waiting for a writer in the kernel's
 * fifo_open, which froze the whole stack. O_NOCTTY: a terminal device never becomes ours.
 */
const FILE_FLAGS = constants.O_RDONLY | constants.O_NOFOLLOW | constants.O_NONBLOCK | constants.O_NOCTTY;
const DIR_FLAGS = constants.O_RDONLY | constants.O_DIRECTORY | constants.O_NOFOLLOW;

/**
 * Reads `relative` (components below `root`) as a file an untrusted agent left: every directory on
 * the way and the file itself are opened without following a link, each relative to the one
 * before (through `/proc/self/fd`, Node's stand-in for openat), so a directory the agent swapped
 * for a link is refused too; only a regular file with one link is read, and at most `maxBytes`.
 * Undefined when the file (or a directory on its way) does not exist. `root` itself is lanes'.
 *
 * Synchronous on purpose: nothing here can block once the file is known to be regular (a FIFO or a
 * device is refused before any read), and the read is bounded by `maxBytes` (at most
 * MAX_RESULT_BYTES_LIMIT) from the sandbox directory on the worker's own disk.
 */
export function readBeneath(root: string, relative: readonly string[], maxBytes: number): Buffer | undefined {
  const name = relative.at(-1);
  if (name === undefined || relative.some((c) => c === '' || c === '.' || c === '..' || c.includes('/'))) {
    throw new RangeError(`not a path below the sandbox workdir: ${relative.join('/')}`);
  }
  const fds: number[] = [];
  try {
    let dir = openSync(root, DIR_FLAGS);
    fds.push(dir);
    for (const component of relative.slice(0, -1)) {
      const fd = openOrMissing(`/proc/self/fd/${dir}/${component}`, DIR_FLAGS, component, name);
      if (fd === undefined) return undefined;
      fds.push((dir = fd));
    }
    const fd = openOrMissing(`/proc/self/fd/${dir}/${name}`, FILE_FLAGS, name, name);
    if (fd === undefined) return undefined;
    fds.push(fd);
    const stat = fstatSync(fd);
    checkFile(name, stat, maxBytes);
    return readCapped(fd, name, stat.size, maxBytes);
  } finally {
    for (const fd of fds) closeSync(fd);
  }
}

function openOrMissing(path: string, flags: number, component: string, file: string): number | undefined {
  try {
    return openSync(path, flags);
  } catch (error) {
    switch ((error as NodeJS.ErrnoException).code) {
      case 'ENOENT':
        return undefined;
      case 'ELOOP':
        throw linkError(component, file);
      case 'ENOTDIR':
        // O_DIRECTORY | O_NOFOLLOW answers ENOTDIR for a link too; tell the two apart for the reason.
        if (lstatSync(path, { throwIfNoEntry: false })?.isSymbolicLink()) throw linkError(component, file);
        throw new AgentFileError(file, 'not-regular', `is under ${component}, which is not a directory`);
      case 'ENXIO':
        // A socket, or a FIFO opened for writing: neither is a file.
        throw new AgentFileError(file, 'not-regular', 'is a socket, not a regular file');
      default:
        throw error;
    }
  }
}

function linkError(component: string, file: string): AgentFileError {
  const where = component === file ? 'is a symbolic link' : `is under ${component}, which is a symbolic link`;
  return new AgentFileError(file, 'link', `${where}; lanes reads no file through a link`);
}

function checkFile(name: string, stat: Stats, maxBytes: number): void {
  if (!stat.isFile()) throw new AgentFileError(name, 'not-regular', `is ${kindOf(stat)}, not a regular file`);
  // A hard link to a file the agent could read but did not write (a config, a key) would pass the
  // checks above; a file the agent made itself has one link.
  if (stat.nlink > 1) throw new AgentFileError(name, 'hard-link', `has ${stat.nlink} hard links; lanes reads only a file with one`);
  if (stat.size > maxBytes) throw tooLarge(name, stat.size, maxBytes);
}

/** Reads to EOF, never more than maxBytes + 1 bytes (a file still growing is caught by the + 1). */
function readCapped(fd: number, name: string, sizeHint: number, maxBytes: number): Buffer {
  let buffer = Buffer.allocUnsafe(Math.min(sizeHint, maxBytes) + 1);
  let filled = 0;
  for (;;) {
    const n = readSync(fd, buffer, filled, buffer.length - filled, null);
    if (n === 0) break;
    filled += n;
    if (filled > maxBytes) throw tooLarge(name, filled, maxBytes, 'grew past');
    if (filled === buffer.length) buffer = Buffer.concat([buffer, Buffer.allocUnsafe(Math.min(buffer.length, maxBytes + 1 - buffer.length))]);
  }
  return buffer.subarray(0, filled);
}

function tooLarge(name: string, size: number, maxBytes: number, verb = 'is'): AgentFileError {
  return new AgentFileError(name, 'too-large', `${verb} ${formatBytes(size)} (limit ${formatBytes(maxBytes)})`);
}

function kindOf(stat: Stats): string {
  if (stat.isFIFO()) return 'a FIFO';
  if (stat.isDirectory()) return 'a directory';
  if (stat.isCharacterDevice()) return 'a character device';
  if (stat.isBlockDevice()) return 'a block device';
  // A socket never gets here: opening one fails (ENXIO) before fstat.
  return 'not a file';
}
