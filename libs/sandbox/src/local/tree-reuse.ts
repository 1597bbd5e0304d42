import { lstatSync, readdirSync, renameSync, unlinkSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { HostTrash } from './host-files.js';

/**
 * A finished card's directories, taken over by the next card instead of removed and made again.
 * On this host's ext4 a directory costs far more than a file: an `rmdir` 120–430 µs and a `mkdir`
 * 30–250 µs, on the worker's event loop, where they were most of a card's file work
 * (bench/README.md). It is safe only when no process of the sandbox is left, which the sandbox's
 * init reports at each command's end: a process the last card left behind could otherwise write
 * into the next card's tree through a directory it holds (its working directory, say).
 *
 * `from` is renamed to the targets' common parent; a target found there as a directory is emptied,
 * everything else in the parent goes; links inside are removed, not followed. Answers the targets,
 * clean and empty; or undefined, with nothing touched, when the targets do not share one parent,
 * `from` is not a directory, or the rename fails (the caller then removes `from` and makes the
 * targets as usual).
 */
export async function reuseTree(from: string, targets: readonly string[], trash: HostTrash): Promise<Set<string> | undefined> {
  const parent = dirname(targets[0]!);
  if (targets.some((t) => dirname(t) !== parent) || parent === from || parent.startsWith(`${from}/`) || from.startsWith(`${parent}/`)) return undefined;
  try {
    // A link where the card's directory was (its agent may have put one there) is never followed.
    if (!lstatSync(from).isDirectory()) return undefined;
    renameSync(from, parent);
  } catch {
    return undefined;
  }
  const clean = new Set<string>();
  for (const entry of readdirSync(parent, { withFileTypes: true })) {
    const path = join(parent, entry.name);
    if (!entry.isDirectory()) unlinkSync(path);
    else if (!targets.includes(path)) await trash.discard(path);
    else {
      for (const child of readdirSync(path)) await trash.discard(join(path, child));
      clean.add(path);
    }
  }
  return clean;
}
