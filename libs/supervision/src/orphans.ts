import type { LivenessVerdict } from '@lanes/contracts';
import { livenessOf } from './liveness.js';

/** A sandbox the provider lists, with whatever tags it carries. */
export interface ListedSandbox {
  id: string;
  tags: { worker?: string; lane?: string; slot?: string };
  /** Set by providers that can see the creating process itself (local: same host). */
  ownerAlive?: boolean;
}

export interface OrphanSnapshot {
  sandboxes: readonly ListedSandbox[];
  /** The supervisor's liveness verdicts, by worker (from `evaluateLiveness`). */
  liveness: Readonly<Record<string, LivenessVerdict>>;
}

export interface OrphanOptions {
  /**
   * Reap sandboxes with no `worker` tag. Default false: their owner is unknown, and unknown never
   * destroys. Set it only when the listing is already scoped to this fleet (e.g. its own Modal
   * app), so an untagged sandbox there can only be a leak of ours.
   */
  reapUntagged?: boolean;
  /**
   * A gone owner's sandboxes are reaped only once its watched silence exceeds this. Pass the BullMQ
   * lock duration: a worker silent for longer than its lock has fenced every run it had (or lost
   * it), so its sandboxes hold no live work; before that, a partitioned worker's run may still be
   * working. Unset: gone is enough.
   */
  reapAfterSilenceMs?: number;
}

/** Who lanes recorded as a sandbox's creator when it made it (FleetStore's sandbox record). */
export interface SandboxOwnerRecord {
  worker: string;
  lane: string;
  slot: string;
}

/**
 * Fills in the owner of each listed sandbox that carries no `worker` tag from lanes' own record of
 * the sandboxes it created: a provider may list without tags (Modal's `SandboxInfo.tags` is "not yet
 * exposed in client library"). Tags the listing carries win; a sandbox lanes has no record of keeps
 * no owner, so it stays unknown and is kept.
 */
export function attributeOwners(listed: readonly ListedSandbox[], records: Readonly<Record<string, SandboxOwnerRecord | undefined>>): ListedSandbox[] {
  return listed.map((s) => {
    if (s.tags.worker) return s;
    const record = records[s.id];
    if (!record?.worker) return s;
    return { ...s, tags: { lane: s.tags.lane ?? record.lane, slot: s.tags.slot ?? record.slot, worker: record.worker } };
  });
}

export type OrphanDecision = { action: 'reap'; id: string; reason: string } | { action: 'keep'; id: string; reason: string };

/**
 * Rule 6, one decision per sandbox, in input order. Reap only on an explicit finding: the owner's
 * liveness verdict is `gone`. Alive and unknown keep, and so does an owner with no verdict (never
 * seen, or forgotten). Hence a worker must not be forgotten before its sandboxes are terminated.
 * A gone verdict is overruled when the provider sees the creating process still running: silence
 * on Redis (a partitioned worker) is weaker evidence than the process itself.
 */
export function evaluateOrphans(snapshot: OrphanSnapshot, options: OrphanOptions = {}): OrphanDecision[] {
  return snapshot.sandboxes.map(({ id, tags, ownerAlive }): OrphanDecision => {
    const owner = tags.worker;
    if (owner === undefined || owner === '') {
      return options.reapUntagged
        ? { action: 'reap', id, reason: 'no worker tag, and untagged sandboxes in this listing are ours' }
        : { action: 'keep', id, reason: 'no worker tag: owner unknown, unknown never destroys' };
    }
    const liveness = livenessOf(snapshot.liveness, owner);
    const why = snapshot.liveness[owner]?.reason ?? 'no liveness verdict';
    if (liveness === 'gone' && ownerAlive === true) {
      return { action: 'keep', id, reason: `owner ${owner} is silent on Redis (${why}) but its process still runs: cut off, not dead` };
    }
    const graceMs = options.reapAfterSilenceMs;
    const silentMs = snapshot.liveness[owner]?.silentMs ?? 0;
    if (liveness === 'gone' && graceMs !== undefined && silentMs <= graceMs) {
      return { action: 'keep', id, reason: `owner ${owner} is gone (${why}) but silent only ${silentMs} ms (≤ ${graceMs} ms, its runs may not have fenced yet)` };
    }
    if (liveness === 'gone') return { action: 'reap', id, reason: `owner ${owner} is gone: ${why}` };
    return { action: 'keep', id, reason: `owner ${owner} is ${liveness}: ${why}` };
  });
}

export type WorkerRecordDecision = { action: 'forget'; worker: string; reason: string } | { action: 'keep'; worker: string; reason: string };

/**
 * A worker's beat record (and its published slots) may be dropped once it is gone and none of the
 * listed sandboxes names it as owner any more: then nothing is left to reap on its behalf. Until
 * then the record stays, because it is what makes its orphans reapable.
 */
export function evaluateWorkerRecords(snapshot: OrphanSnapshot): WorkerRecordDecision[] {
  const owners = new Set(snapshot.sandboxes.map((s) => s.tags.worker).filter((w): w is string => Boolean(w)));
  return Object.values(snapshot.liveness).map(({ worker, liveness, reason }): WorkerRecordDecision => {
    if (liveness !== 'gone') return { action: 'keep', worker, reason: `${liveness}: ${reason}` };
    if (owners.has(worker)) return { action: 'keep', worker, reason: 'gone, but sandboxes it owned are still listed' };
    return { action: 'forget', worker, reason: `gone (${reason}) and owns no listed sandbox` };
  });
}
