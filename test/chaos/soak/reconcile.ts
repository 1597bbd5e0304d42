import { isTerminalCardState, type CardRecord } from '@lanes/contracts';
import type { InjectedFault, SandboxKill } from './faults.js';
import type { FailoverRecord } from './failover.js';
import { overlapsOf, runsOf, type LedgerRecord, type Run } from './ledger.js';
import { RUN_EVENTS, type LogFacts, type RunEvent } from './logs.js';
import { judgeKeys, type KeyFigures, type KeyInput } from './keys.js';
import { judgeVanishes, type ProviderVanishes } from './provider-vanishes.js';
import { disagrees, type QueueEnd } from './queue-view.js';
import type { SandboxSighting } from './sandbox-watch.js';
import { committedRun, wastedRuns } from './wasted-runs.js';

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
  /** When the soak began stopping it (a kill -9 or a SIGTERM of a fault); absent: the soak never did. */
  stoppedAtMs?: number;
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
  /** The soak's cancels, the API's answer to each (-1: no answer), and when the answer came back. */
  cancels?: ReadonlyArray<{ cardId: string; status: number; answeredAtMs?: number }>;
  /**
   * Cards the schedule means to fail. The soak plans none today (its agent exits 0 unless it is
   * killed, and a lane's infra retries outlast the kills), so every failed card fails the run.
   */
  intendedFailures: ReadonlySet<string>;
  /** With --failovers: what each failover fault recorded, and what the verdict needs to judge it. */
  failover?: FailoverInput;
  /** Every sandbox the soak's watcher saw on the provider's side (sandbox-watch.ts); absent: not watched. */
  sandboxSightings?: readonly SandboxSighting[];
  /** With --keyed-share or --supersede-share: each card's keys, the lane's key limit, and when each POST was answered. */
  keys?: KeyInput;
}

export interface FailoverInput {
  /** Failover faults in the plan. */
  planned: number;
  /** The ones that happened (a promotion was seen), in order. */
  records: readonly FailoverRecord[];
  /** Redis kills the sentinels turned into a failover (see faults.ts). */
  redisKillsFailedOver: number;
  lockMs: number;
}

/**
 * What the README admits across an asynchronous failover: a run whose move to running or lock
 * renewal was not replicated goes on until its next renewal fails on the new primary, while the
 * new primary's stalled check may hand the card to another run, so two runs may overlap for about
 * one lock duration after the promotion. An overlap counts as the failover's only inside
 * [kill, promotion + 2 locks] (one lock for that, one for the renewal and stalled-check timers).
 */
export const ADMITTED_OVERLAP_LOCKS = 2;

/** What the failovers lost and what lanes did about it (all zero without failovers). */
export interface FailoverFigures {
  planned: number;
  completed: number;
  redisKillsFailedOver: number;
  /** Kill to promotion, per failover. */
  promotionMs: number[];
  /** Replication lag read just before each kill, and the bytes the promoted replica lacked (lower bound); undefined: not read. */
  lagBytes: Array<number | undefined>;
  lostBytes: Array<number | undefined>;
  /** Accepted cards the new primary had no record of; the soak posted them again (a board's remedy). */
  recordsVanished: number;
  reposted: number;
  /** Cards whose history the new primary had only a shorter prefix of; `donesLost`: of those, the ones that had been done. */
  movesLost: number;
  donesLost: number;
  /** Agent runs in flight at a kill, and how they ended: their own outcome committed, or the card run again. */
  inFlight: { runs: number; committed: number; ranAgain: number };
  /** Cards that ran concurrently only inside a failover's admitted window (README: up to about one lock). */
  concurrentAdmitted: number;
  /** Run-fate events of the workers inside the failovers' windows. */
  runEvents: Record<RunEvent, number>;
  /** Finished runs discarded that a failover explains. */
  discardedRuns: number;
}

export interface SoakResult {
  enqueued: number;
  done: number;
  failed: number;
  /** Failed cards the schedule did not mean to fail. */
  unintendedFailed: number;
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
  /** `sandbox.reaped` lines that name no sandbox: neither the reap nor the kill it may explain can be judged. */
  reapsWithoutSandboxId: number;
  /** Sandboxes seen alive on the provider's side and later gone, by cause (provider-vanishes.ts); `unexplained` are false reaps judged from there. */
  providerVanishes: Omit<ProviderVanishes, 'verdicts'>;
  sandboxKills: { injected: number; detected: number };
  workerKills: { injected: number; detected: number };
  recoveryMs: { samples: number; p50?: number; p95?: number };
  /**
   * Cancels the API answered 202; how many of those cards ended cancelled; and how many ended done
   * because their run had already finished (the ledger has its `ok` end by the time the API answered).
   */
  cancels: { accepted: number; endedCancelled: number; finishedFirst: number };
  /** Board says done, the ledger has no run of the card that finished. */
  doneWithoutFinishedRun: number;
  /** Runs (ledger starts) that began after their card's first terminal history entry. */
  ranAfterTerminal: number;
  unexpectedExits: string[];
  /** Cards whose board state and BullMQ job disagree (e.g. done on the board, failed in the queue). */
  boardQueueDisagree: number;
  runs: number;
  /** Agent runs that finished their work (`ok` in the ledger), and agent runs started per done card. */
  finishedRuns: number;
  runsPerDoneCard: number;
  /** Finished runs no card move recorded; `unexplained`: nothing the soak did accounts for the loss. */
  finishedRunsDiscarded: { total: number; unexplained: number };
  failover: FailoverFigures;
  /** Concurrency keys and supersede keys (all zero without --keyed-share and --supersede-share). */
  keys: KeyFigures;
  faults: Record<string, number>;
  examples: {
    lost: string[];
    concurrent: string[];
    terminalTwice: string[];
    falseReaps: string[];
    leftTerminal: string[];
    boardQueueDisagree: string[];
    acceptedCancelNotCancelled: string[];
    unintendedFailed: string[];
    doneWithoutFinishedRun: string[];
    ranAfterTerminal: string[];
    unjudgeableReaps: string[];
    discardedRuns: string[];
    failoverLosses: string[];
    concurrentAdmitted: string[];
    providerFalseReaps: string[];
    keyBeyondLimit: string[];
    supersedeOverlaps: string[];
    supersededWrong: string[];
    newestWrong: string[];
  };
  failures: string[];
}

/** The figures the verdict reads. */
export type GatedFigures = Pick<
  SoakResult,
  | 'lost'
  | 'ranConcurrently'
  | 'terminalTwice'
  | 'falseReaps'
  | 'unintendedFailed'
  | 'doneWithoutFinishedRun'
  | 'ranAfterTerminal'
  | 'unexpectedExits'
  | 'sandboxKills'
  | 'workerKills'
  | 'cancels'
  | 'boardQueueDisagree'
  | 'reapsOwnerUnknown'
  | 'reapsWithoutSandboxId'
  | 'providerVanishes'
  | 'finishedRunsDiscarded'
  | 'failover'
  | 'keys'
>;

/**
 * Every gate of the verdict: a count that fails the run when it is above zero, and what the failure
 * says. Each is something the soak measures; none is informational only.
 */
const GATES = {
  lost: { count: (r) => r.lost, says: (n) => `${n} lost card(s)` },
  ranConcurrently: { count: (r) => r.ranConcurrently, says: (n) => `${n} card(s) ran concurrently` },
  terminalTwice: { count: (r) => r.terminalTwice, says: (n) => `${n} card(s) terminal twice in history` },
  falseReaps: { count: (r) => r.falseReaps, says: (n) => `${n} false reap(s)` },
  providerFalseReaps: {
    count: (r) => r.providerVanishes.unexplained,
    says: (n) => `${n} sandbox(es) vanished on the provider's side with nothing to explain it (owner alive and connected: false reaps)`,
  },
  unintendedFailed: { count: (r) => r.unintendedFailed, says: (n) => `${n} failed card(s) the schedule did not intend` },
  doneWithoutFinishedRun: { count: (r) => r.doneWithoutFinishedRun, says: (n) => `${n} done card(s) with no finished run in the ledger` },
  ranAfterTerminal: { count: (r) => r.ranAfterTerminal, says: (n) => `${n} run(s) started after their card was terminal` },
  unexpectedExits: {
    count: (r) => r.unexpectedExits.length,
    says: (n, r) => `${n} stack process(es) exited by themselves (${r.unexpectedExits.join(', ')})`,
  },
  sandboxKillsUndetected: {
    count: (r) => r.sandboxKills.injected - r.sandboxKills.detected,
    says: (n) => `${n} injected sandbox kill(s) never detected`,
  },
  workerKillsUndetected: {
    count: (r) => r.workerKills.injected - r.workerKills.detected,
    says: (n) => `${n} injected worker kill(s) never detected`,
  },
  cancelsNotHonoured: {
    count: (r) => r.cancels.accepted - r.cancels.endedCancelled - r.cancels.finishedFirst,
    says: (n) => `${n} accepted cancel(s) whose card did not end cancelled`,
  },
  boardQueueDisagree: { count: (r) => r.boardQueueDisagree, says: (n) => `${n} card(s) whose board state and queue disagree` },
  finishedRunsDiscardedUnexplained: {
    count: (r) => r.finishedRunsDiscarded.unexplained,
    says: (n) => `${n} finished agent run(s) discarded with no fault of the soak's to explain it`,
  },
  reapsUnjudgeable: {
    count: (r) => r.reapsOwnerUnknown + r.reapsWithoutSandboxId,
    says: (n) => `${n} reap(s) the soak could not judge`,
  },
  // The run did not test what it says: a planned failover that saw no promotion, or a Redis kill
  // (a restart of the primary) that the sentinels made a failover of.
  failoversIncomplete: {
    count: (r) => r.failover.planned - r.failover.completed,
    says: (n) => `${n} planned failover(s) with no promotion`,
  },
  redisKillsFailedOver: {
    count: (r) => r.failover.redisKillsFailedOver,
    says: (n) => `${n} Redis kill(s) the sentinels turned into a failover`,
  },
  keyLimitExceeded: {
    count: (r) => r.keys.concurrency.beyondLimit,
    says: (n, r) => `${n} run(s) started while their concurrencyKey already had ${r.keys.concurrency.limit ?? '?'} card(s) running`,
  },
  supersedeRanConcurrently: { count: (r) => r.keys.supersede.overlaps, says: (n) => `${n} run(s) started beside a run of another card of their supersedeKey` },
  supersededNotCancelled: {
    count: (r) => r.keys.supersede.supersededWrong,
    says: (n) => `${n} superseded card(s) that neither ended cancelled as superseded nor finished as the README allows`,
  },
  newestNotDone: { count: (r) => r.keys.supersede.newestWrong, says: (n) => `${n} newest card(s) of a supersedeKey that did not end done (nor by the soak's cancel)` },
} satisfies Record<string, { count: (r: GatedFigures) => number; says: (n: number, r: GatedFigures) => string }>;
export type GateName = keyof typeof GATES;

/** How far each gate is from passing (0: it holds). */
export function gateCounts(r: GatedFigures): Record<GateName, number> {
  return Object.fromEntries(Object.entries(GATES).map(([name, g]) => [name, g.count(r)])) as Record<GateName, number>;
}

/** Exit status rule: any gate above zero is a failure of the product, not of the run. */
export function failuresOf(r: GatedFigures): string[] {
  return Object.values(GATES)
    .map((g) => ({ n: g.count(r), g }))
    .filter(({ n }) => n > 0)
    .map(({ n, g }) => g.says(n, r));
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
  const failoverRecords = input.failover?.records ?? [];
  const lockMs = input.failover?.lockMs ?? 0;
  const admittedWindows = failoverRecords.map((f) => [f.atMs, f.promotedAtMs + ADMITTED_OVERLAP_LOCKS * lockMs] as const);
  const inAdmitted = (from: number, to: number) => admittedWindows.some(([a, b]) => from >= a && to <= b);
  const runs = runsOf(input.ledger);
  const overlaps = overlapsOf(input.ledger);
  const concurrent = new Map([...overlaps].filter(([, os]) => !os.every((o) => inAdmitted(o.fromMs, o.toMs))).map(([id, os]) => [id, os.map((o) => o.why)]));
  const concurrentAdmitted = [...overlaps].filter(([id]) => !concurrent.has(id));
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
  const unknownReaps: LogFacts['reaps'] = [];
  for (const reap of input.logs.reaps) {
    const owner = ownerOf(reap, input.workers);
    if (!owner) {
      unknownReaps.push(reap);
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

  const { verdicts: vanishVerdicts, ...providerVanishes } = judgeVanishes(input.sandboxSightings ?? [], {
    sandboxKills: input.sandboxKills,
    workers: input.workers,
    sandboxEnds: input.logs.sandboxEnds,
    partitionGraceMs: input.partitionGraceMs,
  });

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

  const ranAfterTerminal: string[] = [];
  for (const [id, c] of input.cards) {
    const terminal = c?.history.find((h) => isTerminalCardState(h.state));
    if (!terminal) continue;
    const terminalAtMs = Date.parse(terminal.at);
    for (const run of runs.get(id) ?? []) {
      if (run.startMs > terminalAtMs) ranAfterTerminal.push(`${id}: run ${run.run} in ${run.sandbox} started ${run.startMs - terminalAtMs} ms after ${terminal.state}`);
    }
  }
  const failedIds = input.cardIds.filter((id) => input.cards.get(id)?.state === 'failed' && !input.intendedFailures.has(id));

  const disagreeing = input.queueEnds ? input.cardIds.filter((id) => disagrees(input.cards.get(id)?.state, input.queueEnds!.get(id))) : [];
  const doneWithoutRun = [...input.cards.entries()].filter(([id, c]) => c?.state === 'done' && !(runs.get(id) ?? []).some((r) => r.outcome === 'ok')).map(([id]) => id);
  // A cancel races the run it cancels: a run that had already finished (its `ok` end is in the
  // ledger by the time the API answered) may commit done, and that is not a cancel ignored.
  const accepted = (input.cancels ?? []).filter((c) => c.status === 202);
  const acceptedCancels = [...new Set(accepted.map((c) => c.cardId))];
  const cancelNotCancelled = acceptedCancels.filter((id) => input.cards.get(id)?.state !== 'cancelled');
  const finishedFirst = cancelNotCancelled.filter((id) => {
    const answered = Math.min(...accepted.filter((c) => c.cardId === id).map((c) => c.answeredAtMs ?? Number.NEGATIVE_INFINITY));
    return input.cards.get(id)?.state === 'done' && (runs.get(id) ?? []).some((r) => r.outcome === 'ok' && r.endMs !== undefined && r.endMs <= answered);
  });
  const cancelIgnored = cancelNotCancelled.filter((id) => !finishedFirst.includes(id));
  const donesLost = failoverRecords.map((f) => new Set(f.movesLost.filter((m) => m.before === 'done').map((m) => m.card)));
  const wasted = wastedRuns({
    failovers: failoverRecords.map((f, i) => ({ atMs: f.atMs, promotedAtMs: f.promotedAtMs, admittedUntilMs: admittedWindows[i]![1], donesLost: donesLost[i]! })),
    cards: input.cards,
    runs,
    workers: input.workers,
    sandboxKills: input.sandboxKills,
    injected: input.injected,
    acceptedCancels: new Set(acceptedCancels),
    intendedFailures: input.intendedFailures,
    commitWindowMs: input.partitionGraceMs,
  });
  const keys = judgeKeys(input.keys ?? { plan: [], postedAtMs: new Map() }, {
    cards: input.cards,
    runs,
    workers: input.workers,
    sandboxKills: input.sandboxKills,
    acceptedCancels: new Set(acceptedCancels),
    reposted: new Set(failoverRecords.flatMap((f) => f.reposted)),
    inAdmitted,
  });
  const faults: Record<string, number> = {};
  for (const f of input.injected) if (!f.skipped) faults[f.kind] = (faults[f.kind] ?? 0) + 1;

  // Runs in flight at a kill (started before it, not ended before it), and how each ended.
  const inFlight = { runs: 0, committed: 0, ranAgain: 0 };
  for (const f of failoverRecords) {
    for (const [id, cardRuns] of runs) {
      const committed = committedRun(input.cards.get(id), cardRuns);
      // A run with no end (its sandbox killed) was in flight only if its card had no later run before the kill.
      const spans = (r: Run) => r.startMs < f.atMs && (r.endMs !== undefined ? r.endMs > f.atMs : !cardRuns.some((o) => o.startMs > r.startMs && o.startMs < f.atMs));
      for (const run of cardRuns.filter(spans)) {
        inFlight.runs += 1;
        if (run === committed) inFlight.committed += 1;
        else if (cardRuns.some((r) => r.startMs > run.startMs && r.startMs >= f.atMs)) inFlight.ranAgain += 1;
      }
    }
  }
  const runEvents = Object.fromEntries(RUN_EVENTS.map((e) => [e, 0])) as Record<RunEvent, number>;
  for (const e of input.logs.runEvents) if (admittedWindows.some(([a, b]) => e.atMs >= a && e.atMs <= b)) runEvents[e.event] += 1;
  const failover: FailoverFigures = {
    planned: input.failover?.planned ?? 0,
    completed: failoverRecords.length,
    redisKillsFailedOver: input.failover?.redisKillsFailedOver ?? 0,
    promotionMs: failoverRecords.map((f) => f.promotedAtMs - f.atMs),
    lagBytes: failoverRecords.map((f) => f.lagBytesBeforeKill),
    lostBytes: failoverRecords.map((f) => f.lostBytes),
    recordsVanished: failoverRecords.reduce((n, f) => n + f.vanished.length, 0),
    reposted: failoverRecords.reduce((n, f) => n + f.reposted.length, 0),
    movesLost: failoverRecords.reduce((n, f) => n + f.movesLost.length, 0),
    donesLost: donesLost.reduce((n, d) => n + d.size, 0),
    inFlight,
    concurrentAdmitted: concurrentAdmitted.length,
    runEvents,
    discardedRuns: wasted.discarded.filter((d) => d.byFailover).length,
  };

  const result: SoakResult = {
    enqueued: input.enqueued.size,
    done: count('done'),
    failed: count('failed'),
    unintendedFailed: failedIds.length,
    cancelled: count('cancelled'),
    lost: lostIds.length,
    ranConcurrently: concurrent.size,
    terminalTwice: terminalTwice.length,
    leftTerminal: leftTerminal.length,
    falseReaps: falseReaps.length,
    reapsOfPartitioned: partitioned,
    reapsOfDeadOwners: dead,
    reapsOwnerUnknown: unknownReaps.length,
    reapsWithoutSandboxId: input.logs.unnamedReaps.length,
    providerVanishes,
    sandboxKills: { injected: input.sandboxKills.length, detected: sandboxDetected },
    workerKills: { injected: killedWorkers.length, detected: workerDetected },
    recoveryMs: { samples: recovery.length, ...(recovery.length ? { p50: percentile(recovery, 50)!, p95: percentile(recovery, 95)! } : {}) },
    cancels: { accepted: acceptedCancels.length, endedCancelled: acceptedCancels.length - cancelNotCancelled.length, finishedFirst: finishedFirst.length },
    doneWithoutFinishedRun: doneWithoutRun.length,
    ranAfterTerminal: ranAfterTerminal.length,
    unexpectedExits: [...input.unexpectedExits],
    boardQueueDisagree: disagreeing.length,
    runs: [...runs.values()].reduce((n, r) => n + r.length, 0),
    finishedRuns: wasted.finished,
    runsPerDoneCard: wasted.runsPerDoneCard,
    finishedRunsDiscarded: { total: wasted.discarded.length, unexplained: wasted.discarded.filter((d) => !d.explained).length },
    failover,
    keys: keys.figures,
    faults,
    examples: {
      lost: lostIds.slice(0, EXAMPLES).map((id) => `${id}: ${input.cards.get(id)?.state ?? 'no answer'}`),
      concurrent: [...concurrent.entries()].slice(0, EXAMPLES).map(([id, why]) => `${id}: ${why[0]}`),
      terminalTwice: terminalTwice.slice(0, EXAMPLES),
      falseReaps: falseReaps.slice(0, EXAMPLES),
      leftTerminal: leftTerminal.slice(0, EXAMPLES),
      boardQueueDisagree: disagreeing.slice(0, EXAMPLES).map((id) => `${id}: board ${input.cards.get(id)?.state ?? '?'}, queue ${input.queueEnds?.get(id) ?? '?'}`),
      acceptedCancelNotCancelled: cancelIgnored.slice(0, EXAMPLES).map((id) => `${id}: ${input.cards.get(id)?.state ?? 'no answer'}`),
      unintendedFailed: failedIds.slice(0, EXAMPLES).map((id) => `${id}: ${input.cards.get(id)?.history.at(-1)?.message ?? 'no message'}`),
      doneWithoutFinishedRun: doneWithoutRun.slice(0, EXAMPLES),
      ranAfterTerminal: ranAfterTerminal.slice(0, EXAMPLES),
      unjudgeableReaps: [
        ...unknownReaps.map((r) => `${r.sandboxId}: owner unknown (slot ${r.slot ?? '?'}, owner ${r.owner ?? '?'})`),
        ...input.logs.unnamedReaps.map((r) => `no sandbox id at ${new Date(r.atMs).toISOString()} (slot ${r.slot ?? '?'}, ${r.reason ?? 'no reason'})`),
      ].slice(0, EXAMPLES),
      discardedRuns: wasted.discarded.slice(0, EXAMPLES).map((d) => `${d.card}: run ${d.run} in ${d.sandbox}: ${d.explained ?? `unexplained; its card: ${d.trail}`}`),
      failoverLosses: failoverRecords
        .flatMap((f) => [
          ...f.vanished.map((id) => `${id}: record gone on ${f.newPrimary}${f.reposted.includes(id) ? ', re-posted' : ''}, now ${input.cards.get(id)?.state ?? 'no answer'}`),
          ...f.reposted
            .filter((id) => !f.vanished.includes(id))
            .map((id) => `${id}: accepted, missing on ${f.newPrimary}, re-posted, now ${input.cards.get(id)?.state ?? 'no answer'}`),
          ...f.movesLost.map((m) => `${m.card}: ${m.before} before the kill, ${m.after} on ${f.newPrimary}, now ${input.cards.get(m.card)?.state ?? 'no answer'}`),
        ])
        .slice(0, EXAMPLES),
      concurrentAdmitted: concurrentAdmitted.slice(0, EXAMPLES).map(([id, os]) => `${id}: ${os[0]!.why}`),
      providerFalseReaps: vanishVerdicts
        .filter((v) => v.cause === 'unexplained')
        .slice(0, EXAMPLES)
        .map((v) => `${v.sandboxId}: ${v.why}`),
      ...keys.examples,
    },
    failures: [],
  };
  result.failures = failuresOf(result);
  return result;
}
