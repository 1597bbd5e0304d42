import { isTerminalCardState, type CardRecord } from '@lanes/contracts';
import type { InjectedFault, SandboxKill } from './faults.js';
import { concurrentCards, runsOf, type LedgerRecord } from './ledger.js';
import type { LogFacts } from './logs.js';
import { disagrees, type QueueEnd } from './queue-view.js';

/** What the soak knows about one worker life. */
export interface WorkerLife {
  label: string;
  workerId?: string;
  startedAtMs: number;
  endedAtMs?: number;
  /** The soak cut it off from Redis in these windows. */
  partitions: Array<[number, number]>;
  /** Ended by an injected kill -9. */
  killed: boolean;
}

export interface ReconcileInput {
  cardIds: readonly string[];
  enqueued: ReadonlySet<string>;
  /** The board's view after the run settled; undefined where the API did not answer. */
  cards: ReadonlyMap<string, CardRecord | undefined>;
  ledger: readonly LedgerRecord[];
  logs: LogFacts;
  workers: readonly WorkerLife[];
  sandboxKills: readonly SandboxKill[];
  injected: readonly InjectedFault[];
  /**
   * After a partition heals, the supervisor needs up to this long to see the worker's beats
   * again; a reap inside a partition or this long after it is by design, not false.
   */
  partitionGraceMs: number;
  /** Processes of the stack (api, supervisor, workers) that exited without the soak stopping them. */
  unexpectedExits: readonly string[];
  /** Where BullMQ says each card's job ended; undefined when Redis could not be read. */
  queueEnds?: ReadonlyMap<string, QueueEnd>;
  /** The soak's cancels and the API's answer to each (-1: no answer). */
  cancels?: ReadonlyArray<{ cardId: string; status: number }>;
}

export interface SoakResult {
  enqueued: number;
  done: number;
  failed: number;
  cancelled: number;
  lost: number;
  ranConcurrently: number;
  terminalTwice: number;
  /** A terminal state followed by another entry (e.g. done, then blocked). */
  leftTerminal: number;
  falseReaps: number;
  reapsOfPartitioned: number;
  reapsOfDeadOwners: number;
  reapsOwnerUnknown: number;
  sandboxKills: { injected: number; detected: number };
  workerKills: { injected: number; detected: number };
  recoveryMs: { samples: number; p50?: number; p95?: number };
  /** Cancels the API answered 202, and how many of those cards ended cancelled (a run may finish first). */
  cancels: { accepted: number; endedCancelled: number };
  /** Board says done, the ledger has no run of the card that finished. */
  doneWithoutFinishedRun: number;
  unexpectedExits: string[];
  /** Cards whose board state and BullMQ job disagree (e.g. done on the board, failed in the queue). */
  boardQueueDisagree: number;
  runs: number;
  faults: Record<string, number>;
  examples: {
    lost: string[];
    concurrent: string[];
    terminalTwice: string[];
    falseReaps: string[];
    leftTerminal: string[];
    boardQueueDisagree: string[];
    acceptedCancelNotCancelled: string[];
  };
  failures: string[];
}

/** Exit status rule: any of these is a failure of the product, not of the run. */
export function failuresOf(r: Pick<SoakResult, 'lost' | 'ranConcurrently' | 'terminalTwice' | 'falseReaps'>): string[] {
  const out: string[] = [];
  if (r.lost) out.push(`${r.lost} lost card(s)`);
  if (r.ranConcurrently) out.push(`${r.ranConcurrently} card(s) ran concurrently`);
  if (r.terminalTwice) out.push(`${r.terminalTwice} card(s) terminal twice in history`);
  if (r.falseReaps) out.push(`${r.falseReaps} false reap(s)`);
  return out;
}

export function percentile(sorted: readonly number[], p: number): number | undefined {
  if (sorted.length === 0) return undefined;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

/** The worker life that owned a reaped sandbox: by the owner id, else by the slot id's `<worker>-` prefix. */
function ownerOf(reap: LogFacts['reaps'][number], workers: readonly WorkerLife[]): WorkerLife | undefined {
  return workers.find((w) => w.workerId !== undefined && (reap.owner === w.workerId || (reap.slot?.startsWith(`${w.workerId}-`) ?? false)));
}

const EXAMPLES = 10;

export function reconcile(input: ReconcileInput): SoakResult {
  const count = (state: string) => [...input.cards.values()].filter((c) => c?.state === state).length;
  const lostIds = input.cardIds.filter((id) => {
    const c = input.cards.get(id);
    return !c || !isTerminalCardState(c.state);
  });
  const concurrent = concurrentCards(input.ledger);
  const terminalTwice: string[] = [];
  const leftTerminal: string[] = [];
  for (const [id, c] of input.cards) {
    if (!c) continue;
    const terminalAt = c.history.map((h, i) => (isTerminalCardState(h.state) ? i : -1)).filter((i) => i >= 0);
    if (terminalAt.length >= 2) terminalTwice.push(`${id}: ${c.history.map((h) => h.state).join(' → ')}`);
    const first = terminalAt[0];
    if (first !== undefined && c.history.slice(first + 1).some((h) => !isTerminalCardState(h.state))) {
      leftTerminal.push(`${id}: ${c.history.map((h) => h.state + (h.blockedReason ? `(${h.blockedReason})` : '')).join(' → ')}`);
    }
  }

  // Reaps, judged by what the soak itself knows of each owner's life.
  const falseReaps: string[] = [];
  let partitioned = 0;
  let dead = 0;
  let unknown = 0;
  for (const reap of input.logs.reaps) {
    const owner = ownerOf(reap, input.workers);
    if (!owner) {
      unknown += 1;
      continue;
    }
    const alive = owner.startedAtMs <= reap.atMs && (owner.endedAtMs === undefined || reap.atMs < owner.endedAtMs);
    if (!alive) {
      dead += 1;
      continue;
    }
    if (owner.partitions.some(([from, to]) => reap.atMs >= from && reap.atMs <= to + input.partitionGraceMs)) {
      partitioned += 1;
      continue;
    }
    falseReaps.push(`${reap.sandboxId} of live ${owner.label} at ${new Date(reap.atMs).toISOString()} (${reap.reason ?? 'no reason'})`);
  }

  const historyDead = new Set<string>();
  for (const c of input.cards.values()) for (const h of c?.history ?? []) if (h.blockedReason === 'sandbox-dead' && h.sandboxId) historyDead.add(h.sandboxId);
  const reapedIds = new Set(input.logs.reaps.map((r) => r.sandboxId));
  const sandboxDetected = input.sandboxKills.filter((k) => input.logs.deadSandboxes.has(k.sandboxId) || historyDead.has(k.sandboxId) || reapedIds.has(k.sandboxId)).length;

  const killedWorkers = input.workers.filter((w) => w.killed);
  const forgotten = new Set(input.logs.forgotten.map((f) => f.worker));
  const workerDetected = killedWorkers.filter((w) => w.workerId !== undefined && (forgotten.has(w.workerId) || input.logs.reaps.some((r) => ownerOf(r, [w]) !== undefined))).length;

  // Recovery: from the kill to the card running again elsewhere, or done.
  const recovery: number[] = [];
  for (const k of input.sandboxKills) {
    const c = input.cards.get(k.cardId);
    const back = c?.history.find((h) => Date.parse(h.at) >= k.atMs && ((h.state === 'running' && h.sandboxId !== k.sandboxId) || h.state === 'done'));
    if (back) recovery.push(Date.parse(back.at) - k.atMs);
  }
  recovery.sort((a, b) => a - b);

  const disagreeing = input.queueEnds ? input.cardIds.filter((id) => disagrees(input.cards.get(id)?.state, input.queueEnds!.get(id))) : [];
  const runs = runsOf(input.ledger);
  const doneWithoutRun = [...input.cards.entries()].filter(([id, c]) => c?.state === 'done' && !(runs.get(id) ?? []).some((r) => r.outcome === 'ok')).length;
  const acceptedCancels = [...new Set((input.cancels ?? []).filter((c) => c.status === 202).map((c) => c.cardId))];
  const cancelNotCancelled = acceptedCancels.filter((id) => input.cards.get(id)?.state !== 'cancelled');
  const faults: Record<string, number> = {};
  for (const f of input.injected) if (!f.skipped) faults[f.kind] = (faults[f.kind] ?? 0) + 1;

  const result: SoakResult = {
    enqueued: input.enqueued.size,
    done: count('done'),
    failed: count('failed'),
    cancelled: count('cancelled'),
    lost: lostIds.length,
    ranConcurrently: concurrent.size,
    terminalTwice: terminalTwice.length,
    leftTerminal: leftTerminal.length,
    falseReaps: falseReaps.length,
    reapsOfPartitioned: partitioned,
    reapsOfDeadOwners: dead,
    reapsOwnerUnknown: unknown,
    sandboxKills: { injected: input.sandboxKills.length, detected: sandboxDetected },
    workerKills: { injected: killedWorkers.length, detected: workerDetected },
    recoveryMs: { samples: recovery.length, ...(recovery.length ? { p50: percentile(recovery, 50)!, p95: percentile(recovery, 95)! } : {}) },
    cancels: { accepted: acceptedCancels.length, endedCancelled: acceptedCancels.length - cancelNotCancelled.length },
    doneWithoutFinishedRun: doneWithoutRun,
    unexpectedExits: [...input.unexpectedExits],
    boardQueueDisagree: disagreeing.length,
    runs: [...runs.values()].reduce((n, r) => n + r.length, 0),
    faults,
    examples: {
      lost: lostIds.slice(0, EXAMPLES).map((id) => `${id}: ${input.cards.get(id)?.state ?? 'no answer'}`),
      concurrent: [...concurrent.entries()].slice(0, EXAMPLES).map(([id, why]) => `${id}: ${why[0]}`),
      terminalTwice: terminalTwice.slice(0, EXAMPLES),
      falseReaps: falseReaps.slice(0, EXAMPLES),
      leftTerminal: leftTerminal.slice(0, EXAMPLES),
      boardQueueDisagree: disagreeing.slice(0, EXAMPLES).map((id) => `${id}: board ${input.cards.get(id)?.state ?? '?'}, queue ${input.queueEnds?.get(id) ?? '?'}`),
      acceptedCancelNotCancelled: cancelNotCancelled.slice(0, EXAMPLES).map((id) => `${id}: ${input.cards.get(id)?.state ?? 'no answer'}`),
    },
    failures: [],
  };
  result.failures = failuresOf(result);
  return result;
}
