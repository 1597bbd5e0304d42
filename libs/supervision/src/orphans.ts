import type { LivenessVerdict } from '@lanes/contracts';
import { livenessOf } from './liveness.js';

/** A sandbox the provider lists, with whatever tags it carries. */
export interface ListedSandbox {
  id: string;
  tags: { worker?: string; lane?: string; slot?: string };
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
}

export type OrphanDecision = { action: 'reap'; id: string; reason: string } | { action: 'keep'; id: string; reason: string };

/**
 * Rule 6, one decision per sandbox, in input order. Reap only on an explicit finding: the owner's
 * liveness verdict is `gone`. Alive and unknown keep, and so does an owner with no verdict (never
 * seen, or forgotten). Hence a worker must not be forgotten before its sandboxes are terminated.
 */
export function evaluateOrphans(snapshot: OrphanSnapshot, options: OrphanOptions = {}): OrphanDecision[] {
  return snapshot.sandboxes.map(({ id, tags }): OrphanDecision => {
    const owner = tags.worker;
    if (owner === undefined || owner === '') {
      return options.reapUntagged
        ? { action: 'reap', id, reason: 'no worker tag, and untagged sandboxes in this listing are ours' }
        : { action: 'keep', id, reason: 'no worker tag: owner unknown, unknown never destroys' };
    }
    const liveness = livenessOf(snapshot.liveness, owner);
    const why = snapshot.liveness[owner]?.reason ?? 'no liveness verdict';
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
