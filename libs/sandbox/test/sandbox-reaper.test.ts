import { spawn, type ChildProcess } from 'node:child_process';
import { afterEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/index.js';
import { type ProcStat, childrenOf, isAlive, readEnvEntry, readStat, settleUnreadable } from '../src/proc.js';
import { REAP_SCAN_INTERVAL_MS, REAP_TIMEOUT_MS, SANDBOX_ID_ENV, reapScanDue, reapSandbox, sandboxMembers } from '../src/sandbox-reaper.js';

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

describe('settleUnreadable: how long a scan waits for a process it could not read', () => {
  const proc = (pid: number, startTime = 100): ProcStat => ({ pid, startTime, state: 'R', ppid: 1, pgrp: pid, kernelThread: false });
  const SETTLE_MS = 200;
  it.each([
    ['nothing unreadable: nothing to wait for', new Map<string, number>(), [], 1_000, 0, []],
    ['first seen now: wait', new Map<string, number>(), [proc(7)], 1_000, 1, [['7/100', 1_000]]],
    ['seen before, still within the settle time: wait, remembering the first sighting', new Map([['7/100', 1_000]]), [proc(7)], 1_199, 1, [['7/100', 1_000]]],
    ['unreadable for the whole settle time: no member, stop waiting', new Map([['7/100', 1_000]]), [proc(7)], 1_200, 0, [['7/100', 1_000]]],
    ['read (or gone) since: forgotten', new Map([['7/100', 1_000]]), [], 1_010, 0, []],
    ['the pid recycled by another process: a new sighting', new Map([['7/100', 1_000]]), [proc(7, 180)], 1_250, 1, [['7/180', 1_250]]],
  ] as const)('%s', (_what, since, unreadable, nowMs, settling, next) => {
    const answer = settleUnreadable(since, unreadable, nowMs, SETTLE_MS);
    expect(answer.settling).toBe(settling);
    expect([...answer.since]).toEqual(next);
  });
});

describe('readEnvEntry on real processes', () => {
  it('tells a member, a non-member and a process with no environment to read apart', async () => {
    const marked = spawn('sleep', ['30'], { env: { MARK: 'yes' }, stdio: 'ignore' });
    const bare = spawn('sleep', ['30'], { env: {}, stdio: 'ignore' });
    try {
      await waitFor('both to run sleep', () => readStat(marked.pid!)?.state && readStat(bare.pid!)?.state);
      await waitFor('the marked one to show its environment', () => readEnvEntry(marked.pid!, 'MARK=yes') === 'match');
      expect(readEnvEntry(marked.pid!, 'MARK=no')).toBe('other');
      expect(readEnvEntry(marked.pid!, 'ARK=yes')).toBe('other');
      // An empty environment reads exactly as a process mid-exec does: the scan cannot tell yet.
      expect(readEnvEntry(bare.pid!, 'MARK=yes')).toBe('unreadable');
      expect(readEnvEntry(2 ** 22 + 1, 'MARK=yes')).toBe('other');
    } finally {
      marked.kill('SIGKILL');
      bare.kill('SIGKILL');
    }
  });
});

describe('reapSandbox on real processes', () => {
  const started: ChildProcess[] = [];
  const ids: string[] = [];
  afterEach(() => {
    for (const c of started.splice(0)) {
      try {
        process.kill(-c.pid!, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    for (const pid of ids.splice(0).flatMap((id) => sandboxMembers(id))) process.kill(pid, 'SIGKILL');
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

  it('a process it cannot read when it scans is read again: one that shows the marker a moment later is killed too', async () => {
    const id = `reap-unread-${process.pid}-${Date.now()}`;
    ids.push(id);
    // The member leaves the root's group with no environment (as the kernel shows a process mid-exec)
    // and takes the marker back only once the root is gone: the root alone holds the write end of its stdin.
    // It takes the marker in one exec: through `env` it would read as a non-member for a moment (sh exports PWD).
    const member = `cat >/dev/null; sleep 0.2; ${SANDBOX_ID_ENV}=${id} exec sleep 30`;
    const root = spawn('bash', ['-c', `exec 9> >(exec env -i setsid sh -c '${member}'); echo ready; exec sleep 30`], {
      detached: true,
      stdio: ['ignore', 'pipe', 'ignore'],
      env: { ...process.env, [SANDBOX_ID_ENV]: id },
    });
    started.push(root);
    await new Promise<void>((resolve) => root.stdout!.once('data', () => resolve()));
    const rootStartTime = readStat(root.pid!)!.startTime;
    const shell = await waitFor('the member to run with no environment, outside the root group', () => {
      const children = childrenOf(root.pid!).flatMap((pid) => readStat(pid) ?? []);
      const left = children.filter((s) => s.pgrp !== root.pid);
      return left.length === 1 && readEnvEntry(left[0]!.pid, `${SANDBOX_ID_ENV}=${id}`) === 'unreadable' ? left[0] : undefined;
    });
    // A generous settle time: what is tested is that the reap waits at all, not how briefly the kernel's window lasts.
    const survivors = await reapSandbox({ id, rootPid: root.pid!, rootStartTime }, [], { timeoutMs: REAP_TIMEOUT_MS, unreadableSettleMs: REAP_TIMEOUT_MS / 2 });
    expect(survivors).toEqual([]);
    expect(isAlive(root.pid!, rootStartTime)).toBe(false);
    await waitFor('the member to be dead or to carry the marker', () => !isAlive(shell.pid, shell.startTime) || sandboxMembers(id).length > 0);
    expect(sandboxMembers(id)).toEqual([]);
  });
});
