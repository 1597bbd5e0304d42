// Cancel/timeout of ONE command inside a sandbox: SIGINT → grace → SIGTERM → grace → SIGKILL,
// aimed at the command's process group AND at members that left it (setsid, double fork).
// The sandbox itself is never touched: that is the whole point (DESIGN.md failure 1).
import { UNREADABLE_SETTLE_MS, isRunningState, mayBeMember, readEnvEntry, readStat, scanProcesses, unreadableTracker } from './proc.mjs';

/** How often liveness is re-checked while waiting out a grace period; bounds cancel latency overshoot. */
export const ESCALATION_TICK_MS = 10;
/** After SIGKILL, keep sweeping this long for members forked mid-kill before giving up. */
export const KILL_SWEEP_LIMIT_MS = 2_000;

const POLITE_SIGNALS = /** @type {const} */ (['SIGINT', 'SIGTERM']);

/**
 * @param {import('./kill-escalation.d.mts').KillTreeOptions} options
 * @returns {Promise<import('./kill-escalation.d.mts').KillTreeOutcome>}
 */
export async function killTree(options) {
  const { pgid, leaderPid, envMarker, graceMs } = options;
  const tickMs = options.tickMs ?? ESCALATION_TICK_MS;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? ((ms) => new Promise((resolve) => setTimeout(resolve, ms)));
  const exclude = options.exclude ?? new Set([process.pid]);
  const unreadableScans = unreadableTracker(options.unreadableSettleMs ?? UNREADABLE_SETTLE_MS, now);
  // Members are born after the leader; one caught mid-exec reads as unreadable (proc.mjs).
  const bornSince = readStat(leaderPid)?.startTime;

  /** pid → start time, so a pid recycled during the escalation is never signalled. */
  const members = new Map();
  /** How many processes the last marker scan could not read, and still waits for. */
  let settling = 0;

  // Membership is re-derived at each step and accumulated: descendants must be recorded while their
  // parent still lives, because once it dies they are re-parented and the ppid chain is gone.
  const collect = (withEnv) => {
    const table = scanProcesses();
    const childrenByParent = new Map();
    for (const p of table) {
      if (exclude.has(p.pid) || !isRunningState(p.state)) continue;
      if (p.pgrp === pgid) members.set(p.pid, p.startTime);
      const siblings = childrenByParent.get(p.ppid);
      if (siblings) siblings.push(p);
      else childrenByParent.set(p.ppid, [p]);
    }
    const frontier = [leaderPid, ...members.keys()];
    const seen = new Set(frontier);
    while (frontier.length > 0) {
      const parent = /** @type {number} */ (frontier.pop());
      for (const child of childrenByParent.get(parent) ?? []) {
        if (seen.has(child.pid)) continue;
        seen.add(child.pid);
        members.set(child.pid, child.startTime);
        frontier.push(child.pid);
      }
    }
    if (withEnv && envMarker) {
      const unreadable = [];
      for (const p of table) {
        if (members.has(p.pid) || exclude.has(p.pid) || !isRunningState(p.state)) continue;
        const found = readEnvEntry(p.pid, envMarker);
        if (found === 'match') members.set(p.pid, p.startTime);
        else if (found === 'unreadable' && mayBeMember(p, bornSince)) unreadable.push(p);
      }
      settling = unreadableScans.settling(unreadable);
    }
  };

  const pruneDead = () => {
    for (const [pid, startTime] of members) {
      const stat = readStat(pid);
      if (!stat || stat.startTime !== startTime || !isRunningState(stat.state)) members.delete(pid);
    }
    return members.size;
  };

  /** After a marker scan: no member left alive, and no process the scan could not read to wait for. */
  const cleared = () => pruneDead() === 0 && settling === 0;

  const signalAll = (signal) => {
    trySignal(-pgid, signal);
    for (const pid of members.keys()) trySignal(pid, signal);
  };

  for (const signal of POLITE_SIGNALS) {
    collect(true);
    if (cleared()) return { lastSignal: previous(signal), survivors: [] };
    // Escaped members get the polite signals too: they are part of the cancelled work and may
    // want to clean up; they are SIGKILLed with the rest if they don't.
    signalAll(signal);
    const until = now() + graceMs;
    while (now() < until) {
      await sleep(tickMs);
      collect(false);
      if (pruneDead() > 0) continue;
      // The known members are gone: a marker scan tells whether any other is left.
      collect(true);
      if (cleared()) return { lastSignal: signal, survivors: [] };
    }
  }

  const until = now() + KILL_SWEEP_LIMIT_MS;
  for (;;) {
    collect(true);
    if (cleared()) return { lastSignal: 'SIGKILL', survivors: [] };
    if (now() >= until) return { lastSignal: 'SIGKILL', survivors: [...members.keys()] };
    signalAll('SIGKILL');
    await sleep(tickMs);
  }
}

function previous(signal) {
  return signal === 'SIGINT' ? 'none' : 'SIGINT';
}

function trySignal(pid, signal) {
  try {
    process.kill(pid, signal);
  } catch {
    // ESRCH: already gone, which is what we want. EPERM cannot happen for our own children.
  }
}
