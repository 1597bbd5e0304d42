/**
 * The soak's janitor: a separate, detached process that cleans up everything the soak made, even
 * when the soak itself is SIGKILLed. The soak writes one JSON line per resource to the janitor's
 * stdin *before* creating it; when stdin ends (the soak finished, failed or died, however), the
 * janitor removes them all: our processes (checked by pid and start time, so a reused pid is left
 * alone), the sandboxes under our sandbox dir, the processes still in our namespaces, the
 * namespaces and links, and the run directory. Then it writes what it did to its stdout and exits.
 * It touches nothing that was not registered.
 */
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { createInterface } from 'node:readline';
import { isSameProcess, killQuietly, sandboxPidsUnder } from './proc.js';
import { removeNet } from './netns.js';

export type JanitorEntry =
  | { kind: 'process'; pid: number; startTime: number; label: string }
  | { kind: 'sandboxes'; dir: string }
  | { kind: 'netns'; name: string }
  | { kind: 'link'; name: string }
  | { kind: 'dir'; path: string }
  | { kind: 'keep-dirs' };

/** Sandboxes of a worker killed just now may still be starting; sweep until none are left or this passes. */
const SANDBOX_SWEEP_MS = 10_000;

async function clean(entries: JanitorEntry[]): Promise<string[]> {
  const done: string[] = [];
  for (const e of entries) {
    if (e.kind === 'process' && isSameProcess(e.pid, e.startTime) && killQuietly(e.pid)) done.push(`killed ${e.label} (${e.pid})`);
  }
  for (const e of entries) {
    if (e.kind !== 'netns') continue;
    // Only processes the soak started run in its namespaces.
    const pids = spawnSync('ip', ['netns', 'pids', e.name], { encoding: 'utf8' }).stdout?.split(/\s+/).filter(Boolean) ?? [];
    for (const p of pids) if (killQuietly(Number(p))) done.push(`killed pid ${p} in ${e.name}`);
  }
  const deadline = Date.now() + SANDBOX_SWEEP_MS;
  for (const e of entries) {
    if (e.kind !== 'sandboxes') continue;
    for (;;) {
      const pids = sandboxPidsUnder(e.dir);
      if (pids.length === 0 || Date.now() > deadline) break;
      for (const p of pids) if (killQuietly(p)) done.push(`killed sandbox process ${p}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  for (const e of entries) {
    if (e.kind === 'link' || e.kind === 'netns') {
      removeNet(e.kind, e.name);
      done.push(`removed ${e.kind} ${e.name}`);
    }
  }
  if (!entries.some((e) => e.kind === 'keep-dirs')) {
    for (const e of entries) {
      if (e.kind !== 'dir') continue;
      rmSync(e.path, { recursive: true, force: true });
      done.push(`removed ${e.path}`);
    }
  }
  return done;
}

async function main(): Promise<void> {
  // The soak handles Ctrl-C itself and then ends our stdin; a signal must not stop the cleanup.
  for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(s, () => undefined);
  // With the soak gone there is nobody to read our report; that must not stop the cleanup.
  process.stdout.on('error', () => undefined);
  const entries: JanitorEntry[] = [];
  for await (const line of createInterface({ input: process.stdin })) {
    if (line.trim()) entries.push(JSON.parse(line) as JanitorEntry);
  }
  const done = await clean(entries);
  process.stdout.write(`${JSON.stringify({ cleaned: done })}\n`);
}

await main();
