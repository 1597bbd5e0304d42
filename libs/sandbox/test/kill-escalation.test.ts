import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { killTree } from '../runtime/kill-escalation.mjs';
import { findByEnvEntry, isAlive, readEnvEntry, readStat } from '../src/proc.js';
import { waitFor } from './support/wait-for.js';

// killTree is what the sandbox init runs on cancel/timeout; here it is driven directly against real
// process trees started by the test (in their own session, as the init starts commands).

const GRACE_MS = 150;
const started: ChildProcess[] = [];

function startTree(script: string, marker: string): ChildProcess {
  const child = spawn('bash', ['-c', script], {
    detached: true,
    stdio: ['ignore', 'pipe', 'ignore'],
    env: { ...process.env, TREE_MARKER: marker },
  });
  started.push(child);
  return child;
}

async function ready(child: ChildProcess): Promise<void> {
  await new Promise<void>((resolve) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('ready')) resolve();
    });
  });
}

const live = (marker: string): number[] => findByEnvEntry(`TREE_MARKER=${marker}`).map((p) => p.pid);

afterEach(() => {
  for (const child of started.splice(0)) {
    try {
      process.kill(-child.pid!, 'SIGKILL');
    } catch {
      // already gone
    }
  }
});

describe('killTree', () => {
  it('stops at SIGINT, without waiting out the grace, when the tree obeys it', async () => {
    const marker = `obey-${Date.now()}`;
    const child = startTree('echo ready; exec sleep 30', marker);
    await ready(child);
    const startedAtMs = Date.now();
    // A grace far longer than the tree takes to obey: ending before it proves it was not waited out.
    const graceMs = 30_000;
    const outcome = await killTree({ pgid: child.pid!, leaderPid: child.pid!, envMarker: `TREE_MARKER=${marker}`, graceMs });
    expect(outcome).toEqual({ lastSignal: 'SIGINT', survivors: [] });
    expect(Date.now() - startedAtMs).toBeLessThan(graceMs);
    expect(live(marker)).toEqual([]);
  });

  it('stops at SIGTERM, one grace and not two, when only SIGINT is ignored', async () => {
    const marker = `noint-${Date.now()}`;
    const child = startTree('trap "" INT; sleep 30 & sleep 30 & echo ready; wait', marker);
    await ready(child);
    await waitFor('the tree to start', () => live(marker).length >= 3);
    const startedAtMs = Date.now();
    // One grace, not two: the second grace (before SIGKILL) ends at 2 × graceMs, 5 s after the start.
    const graceMs = 2_500;
    const outcome = await killTree({ pgid: child.pid!, leaderPid: child.pid!, envMarker: `TREE_MARKER=${marker}`, graceMs });
    const elapsedMs = Date.now() - startedAtMs;
    expect(outcome).toEqual({ lastSignal: 'SIGTERM', survivors: [] });
    expect(elapsedMs).toBeGreaterThanOrEqual(graceMs);
    expect(elapsedMs).toBeLessThan(2 * graceMs);
    expect(live(marker)).toEqual([]);
  });

  it('escalates to SIGKILL for a tree that ignores SIGINT and SIGTERM, including escaped members', async () => {
    const marker = `stubborn-${Date.now()}`;
    const child = startTree('trap "" INT TERM; sleep 30 & setsid sleep 30 & ( setsid sleep 30 & ); echo ready; wait', marker);
    await ready(child);
    await waitFor('the tree to start', () => live(marker).length >= 4);
    const startedAtMs = Date.now();
    const outcome = await killTree({ pgid: child.pid!, leaderPid: child.pid!, envMarker: `TREE_MARKER=${marker}`, graceMs: GRACE_MS });
    expect(outcome).toEqual({ lastSignal: 'SIGKILL', survivors: [] });
    expect(Date.now() - startedAtMs).toBeGreaterThanOrEqual(2 * GRACE_MS);
    expect(live(marker)).toEqual([]);
  });

  it('finds a re-parented escapee by its env marker alone', async () => {
    const marker = `orphan-${Date.now()}`;
    // The subshell exits at once, so the setsid'd sleep has neither our group nor our ancestry.
    const child = startTree('( trap "" INT TERM; exec setsid sleep 30 & ); echo ready; exec sleep 30', marker);
    await ready(child);
    await waitFor('the orphan to start', () => live(marker).length >= 2);
    const outcome = await killTree({ pgid: child.pid!, leaderPid: child.pid!, envMarker: `TREE_MARKER=${marker}`, graceMs: GRACE_MS });
    expect(outcome.survivors).toEqual([]);
    expect(live(marker)).toEqual([]);
  });

  it('reports none when nothing is alive', async () => {
    const child = startTree('echo ready', `none-${Date.now()}`);
    await new Promise((resolve) => child.once('exit', resolve));
    expect(await killTree({ pgid: child.pid!, leaderPid: child.pid!, graceMs: GRACE_MS })).toEqual({ lastSignal: 'none', survivors: [] });
  });

  it('reads again a process it cannot read yet: an orphaned escapee that shows the marker only after the leader dies is killed too', async () => {
    const marker = `unread-${Date.now()}`;
    const dir = mkdtempSync(join(tmpdir(), 'kill-unread-'));
    const pidFile = join(dir, 'pid');
    try {
      // The escapee is orphaned (double fork), has no environment (as the kernel shows a process
      // mid-exec), and takes the marker back once the leader, the only writer of its stdin, is gone.
      // It takes the marker in one exec: through `env` it would read as a non-member for a moment (sh exports PWD).
      const escapee = `echo \\$\\$ > ${pidFile}; cat >/dev/null; sleep 0.2; TREE_MARKER=${marker} exec sleep 30`;
      const child = startTree(`exec 9> >(exec sh -c 'exec 3<&0; (env -i setsid sh -c "${escapee}" <&3 3<&- &)'); echo ready; exec sleep 30`, marker);
      await ready(child);
      const pid = await waitFor('the escapee to run', () => (existsSync(pidFile) ? Number(readFileSync(pidFile, 'utf8').trim()) || undefined : undefined));
      const stat = await waitFor('the escapee orphaned, with no environment', () => {
        const s = readStat(pid);
        // Orphaned: its parent no longer carries the tree's marker, so no ppid walk from the leader finds it.
        const orphaned = s !== undefined && readEnvEntry(s.ppid, `TREE_MARKER=${marker}`) !== 'match';
        return orphaned && readEnvEntry(pid, `TREE_MARKER=${marker}`) === 'unreadable' ? s : undefined;
      });
      // A settle time longer than the escapee's wait: what is tested is that the kill waits at all.
      const outcome = await killTree({ pgid: child.pid!, leaderPid: child.pid!, envMarker: `TREE_MARKER=${marker}`, graceMs: GRACE_MS, unreadableSettleMs: 5_000 });
      expect(outcome.survivors).toEqual([]);
      await waitFor('the escapee dead or marked', () => !isAlive(pid, stat.startTime) || live(marker).length > 0);
      expect(live(marker)).toEqual([]);
    } finally {
      for (const pid of live(marker)) process.kill(pid, 'SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
