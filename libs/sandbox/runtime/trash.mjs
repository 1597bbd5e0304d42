// A local sandbox's trash: trees the host moved aside (one rename, so their paths were free at once),
// removed here by the sandbox's own init. Plain JS, so the init runs it on bare `node`; the host's
// tests import it through trash.d.mts.
import { lstatSync, readdirSync, rmdirSync, unlinkSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { join } from 'node:path';

/**
 * How often the init empties its trash. Removal costs file-system journal waits, not CPU: done here,
 * once a second for everything discarded meanwhile, it never holds up the host's event loop (its
 * lock renewals, heartbeats and /healthz), which did it once per card before.
 */
export const TRASH_SWEEP_INTERVAL_MS = 1_000;
/** A tree is removed synchronously up to this many entries; a larger one (a cloned repository) in the thread pool. */
export const SYNC_REMOVE_MAX_ENTRIES = 256;

/**
 * Removes every tree in `dir`, one at a time, yielding to the event loop between trees so the init's
 * exec requests are not held up. A missing `dir` is empty. Answers the errors met; a tree that could
 * not be removed is left for the next sweep.
 */
export async function emptyTrash(dir) {
  let names;
  try {
    names = readdirSync(dir);
  } catch (error) {
    return error?.code === 'ENOENT' ? [] : [error];
  }
  const errors = [];
  for (const name of names) {
    const path = join(dir, name);
    try {
      if (!removeBounded(path, { left: SYNC_REMOVE_MAX_ENTRIES })) await rm(path, { recursive: true, force: true });
    } catch (error) {
      errors.push(error);
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
  return errors;
}

/** Removes the tree if it has at most `budget.left` entries; false (part of it left) otherwise. */
function removeBounded(path, budget) {
  // A link is removed, never followed: what it points at may be outside the sandbox.
  if (!lstatSync(path).isDirectory()) {
    unlinkSync(path);
    return true;
  }
  return removeDirBounded(path, budget);
}

function removeDirBounded(dir, budget) {
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
