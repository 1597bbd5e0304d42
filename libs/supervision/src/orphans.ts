/** A sandbox the provider lists, with whatever tags it carries. */
export interface ListedSandbox {
  id: string;
  tags: { worker?: string; lane?: string; slot?: string };
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
 * Rule 6, one decision per sandbox, in input order. Reap only on an explicit finding: the owner
 * worker HAS a heartbeat record and it is older than the timeout (now − lastBeat > heartbeatTimeoutMs;
 * at exactly the timeout it is kept). An owner with no record (never seen, or forgotten) is unknown:
 * keep. Hence a worker must not be forgotten before its sandboxes are terminated.
 */
export function evaluateOrphans(
  sandboxes: readonly ListedSandbox[],
  heartbeats: Readonly<Record<string, number>>,
  heartbeatTimeoutMs: number,
  now: number,
  options: OrphanOptions = {},
): OrphanDecision[] {
  return sandboxes.map(({ id, tags }): OrphanDecision => {
    const owner = tags.worker;
    if (owner === undefined || owner === '') {
      return options.reapUntagged
        ? { action: 'reap', id, reason: 'no worker tag, and untagged sandboxes in this listing are ours' }
        : { action: 'keep', id, reason: 'no worker tag: owner unknown, unknown never destroys' };
    }
    if (!Object.hasOwn(heartbeats, owner)) {
      return { action: 'keep', id, reason: `owner ${owner} has no heartbeat record: unknown, keep` };
    }
    const lastBeat = heartbeats[owner]!;
    const ageMs = now - lastBeat;
    if (ageMs > heartbeatTimeoutMs) {
      return { action: 'reap', id, reason: `owner ${owner} last beat ${ageMs} ms ago (> ${heartbeatTimeoutMs} ms)` };
    }
    return { action: 'keep', id, reason: `owner ${owner} beat ${ageMs} ms ago (≤ ${heartbeatTimeoutMs} ms)` };
  });
}

export type WorkerRecordDecision = { action: 'forget'; worker: string; reason: string } | { action: 'keep'; worker: string; reason: string };

/**
 * A worker's heartbeat record (and its published slots) may be dropped once its beat has expired
 * and none of the listed sandboxes names it as owner any more: then nothing is left to reap on its
 * behalf. Until then the record stays, because it is what makes its orphans reapable.
 */
export function evaluateWorkerRecords(
  heartbeats: Readonly<Record<string, number>>,
  sandboxes: readonly ListedSandbox[],
  heartbeatTimeoutMs: number,
  now: number,
): WorkerRecordDecision[] {
  const owners = new Set(sandboxes.map((s) => s.tags.worker).filter((w): w is string => Boolean(w)));
  return Object.entries(heartbeats).map(([worker, lastBeat]): WorkerRecordDecision => {
    const ageMs = now - lastBeat;
    if (!(ageMs > heartbeatTimeoutMs)) return { action: 'keep', worker, reason: `beat ${ageMs} ms ago: alive` };
    if (owners.has(worker)) return { action: 'keep', worker, reason: 'expired, but sandboxes it owned are still listed' };
    return { action: 'forget', worker, reason: `expired ${ageMs} ms ago and owns no listed sandbox` };
  });
}
