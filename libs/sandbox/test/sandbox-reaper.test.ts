import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/index.js';
import { readStat } from '../src/proc.js';
import { REAP_SCAN_INTERVAL_MS, SANDBOX_ID_ENV, reapScanDue, reapSandbox, sandboxMembers } from '../src/sandbox-reaper.js';

describe('reapScanDue: when a reap reads every host process for the sandbox marker', () => {
  it.each([
    ['root and namespace init gone: every poll, until no member is left', { rootAlive: false, nsInitAlive: false, msSinceScan: 0 }, true],
    ['root still dying, scanned a poll ago: wait for it', { rootAlive: true, nsInitAlive: false, msSinceScan: 10 }, false],
    ['namespace init still dying: its members die with it', { rootAlive: false, nsInitAlive: true, msSinceScan: REAP_SCAN_INTERVAL_MS - 1 }, false],
    ['a root that outlives the interval: scan anyway, for members outside it', { rootAlive: true, nsInitAlive: true, msSinceScan: REAP_SCAN_INTERVAL_MS }, true],
  ])('%s', (_what, state, due) => {
    expect(reapScanDue(state)).toBe(due);
  });
});

describe('reapSandbox on real processes', () => {
  const started: ChildProcess[] = [];
  afterEach(() => {
    for (const c of started.splice(0)) {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
  });

  it('kills the root and a member that left its process group (setsid), found by the marker once the root is gone', async () => {
    const id = `reap-${process.pid}-${Date.now()}`;
    const root = spawn('bash', ['-c', 'setsid sleep 30 & echo ready; exec sleep 30'], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, [SANDBOX_ID_ENV]: id },
    });
    started.push(root);
    await new Promise<void>((resolve) => root.stdout!.once('data', () => resolve()));
    // bash echoes as soon as it has forked the background job, which may not have run setsid yet
    // on a loaded box: wait until the member has left the root's group, which is the case under test.
    await waitFor('the background member to leave the root process group', () => {
      const members = sandboxMembers(id).filter((pid) => pid !== root.pid);
      return members.length === 1 && readStat(members[0]!)?.pgrp !== root.pid ? members : undefined;
    });
    const survivors = await reapSandbox({ id, rootPid: root.pid!, rootStartTime: readStat(root.pid!)!.startTime });
    expect(survivors).toEqual([]);
    expect(sandboxMembers(id)).toEqual([]);
  });
});
