import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { IllegalStateError, isTerminalCardState, type Card, type CardState, type LaneConfig } from '@lanes/contracts';
import type { Redis } from 'ioredis';
import {
  appendJobLog,
  reclaimLockMsFor,
  type CardMove,
  type CardStore,
  type CardWriter,
  type EventLog,
  type KeyLimits,
  type ReplicaAck,
  type TransitionResult,
} from '@lanes/queue';
import { prepareCard, runCard, type RunDeps, type RunOutcome } from '@lanes/runner';
import { bestEffort, type SandboxHandle } from '@lanes/sandbox';
import { warnTo } from './best-effort.js';
import { cardFromJob } from './card-from-job.js';
import { answerForEndedCard, endedJobStub, finishEndedJob, settleEndedJob } from './ended-job.js';
import { inResultSpan, inSlotSpan, recordQueueWait, rememberRunTrace, traceLogFields } from './card-trace.js';
import { CRASHED_RUNS_BUDGET } from './crash-budget.js';
import { decideStart } from './decide-start.js';
import { decideCard, withCancelReason, type CardAction, type CardOutcome, type RunContext, type StopReason } from './decide-card.js';
import { jobLogSink } from './job-log.js';
import { admitByKey, releaseByKey } from './key-gate.js';
import { endIfSuperseded } from './supersede-gate.js';
import type { LaneBreaker } from './lane-breaker.js';
import { RunLease } from './run-lease.js';
import type { Slot } from './slot.js';
import type { SlotPool } from './slot-pool.js';

export type { StopReason } from './decide-card.js';

export interface ProcessorDeps {
  lane: LaneConfig;
  /** For the job log: lines are appended in batches. */
  redis: Redis;
  store: CardStore;
  pool: SlotPool;
  breaker: LaneBreaker;
  log: Logger;
  now: () => number;
  monotonicNow: () => number;
  newNonce: () => string;
  lockDurationMs: number;
  /** Running cards by id, so a cancel or a shutdown can stop them. */
  running: Map<string, AbortController>;
  /** Leases by job id, so BullMQ's `lockRenewalFailed` reaches the run it concerns. */
  leases: Map<string, RunLease>;
  /**
   * Where Redis has replicas (Sentinel): waits until one has every write so far. The agent starts
   * only once its claim is on a replica, and a run's ending is on one before BullMQ hears of it, so
   * a failover loses neither (unless no replica answered in time; replica-ack.ts).
   */
  replicaAck?: ReplicaAck;
  /** Fair per-key concurrency and one run per supersede key (key-gate.ts, supersede-gate.ts). */
  keyLimits?: KeyLimits;
  /** The lane's BullMQ job of a card: the key gate wakes a parked card through it. */
  jobOf?: (cardId: string) => Promise<Job | undefined>;
  /** Where the key gate says a card waits for its key (card.key-waiting). */
  events?: Pick<EventLog, 'append'>;
}

/** One run of one card: what the shell steps share. */
interface Run {
  deps: ProcessorDeps;
  job: Job;
  writer: Extract<CardWriter, { kind: 'run' }>;
  card: Card;
  /** The card's infra-retry count, as the move to running answered it (decideCard needs no more of the record). */
  infraRetries: number;
  slot: Slot;
  controller: AbortController;
  lease: RunLease;
  log: Logger;
  /**
   * The agent finished and its outcome is in hand: a fence no longer discards it. Its move may take
   * a lapsed lock back, if no other run has taken the card since (evaluateRunFence).
   */
  finishedAgentRun?: boolean;
}

/** The BullMQ processor of one lane: validate, take a slot under a lease, run the card, act on the decision. */
export function createProcessor(deps: ProcessorDeps) {
  return async function processCard(job: Job, token?: string): Promise<unknown> {
    const { lane, log: baseLog } = deps;
    // A card that ended, handed on before BullMQ finished its job: finished from its record, unrun.
    const ended = endedJobStub(job);
    if (ended) return finishEndedJob(deps, job, ended, baseLog);
    let card: Card;
    try {
      card = cardFromJob(job, lane.name);
    } catch (err) {
      baseLog.warn({ jobId: job.id, err: String(err), event: 'card.invalid' }, 'card.invalid');
      throw err;
    }
    if (!token) throw new IllegalStateError(`BullMQ gave card ${card.id} no lock token`);
    const log = baseLog.child({ cardId: card.id, ...traceLogFields() });
    recordQueueWait(job, lane.name);
    // Over its key's limit, the card is parked before it takes a slot (and this call ends here);
    // one a newer card of its supersede key replaced ends cancelled before it takes one.
    const { keyLimits, jobOf } = deps;
    const gate = keyLimits && jobOf ? { ...deps, keyLimits, jobOf } : undefined;
    const keyed = gate ? await admitByKey(gate, job, card, token, log) : [];
    if (gate) await endIfSuperseded(gate, job, card, token, keyed, log);
    // The record is not read here: the move to running says whether the card may still run, and
    // brings what the decision needs. Only a run that stops before that move reads it.
    // Registered before the slot is ready, so a cancel or shutdown while waiting for a sandbox is not lost.
    const controller = new AbortController();
    deps.running.set(card.id, controller);
    const slot = deps.pool.take(card.id);
    const slotLog = log.child({ slot: slot.id });
    const lease = new RunLease({
      job,
      token,
      lockDurationMs: deps.lockDurationMs,
      killGraceMs: lane.killGraceMs,
      monotonicNow: deps.monotonicNow,
      log: slotLog,
      onFence: (decision) => {
        slotLog.warn({ event: 'card.fenced', cause: decision.cause, reason: decision.reason, sandboxId: slot.handle?.id }, 'card.fenced');
        // Kills the running command's process group (the sandbox survives); the result is discarded.
        controller.abort('fenced' satisfies StopReason);
      },
    });
    deps.leases.set(card.id, lease);
    try {
      return await runInSlot({ deps, job, writer: { kind: 'run', token }, card, infraRetries: 0, slot, controller, lease, log: slotLog });
    } finally {
      lease.stop();
      deps.leases.delete(card.id);
      deps.running.delete(card.id);
      deps.pool.release(slot);
      if (gate) await releaseByKey(gate, keyed, token, log);
    }
  };
}

/** The run lost its lock before it ran anything: its result is discarded, as a fence's. */
function leaseLost(run: Run, context: RunContext): Promise<unknown> {
  return act(run, context, { kind: 'discard', reason: run.lease.fenceDecision()?.reason ?? 'lock lost' });
}

async function runInSlot(run: Run): Promise<unknown> {
  const { deps, job, card, slot, controller, lease } = run;
  const context: RunContext = { attempt: job.attemptsMade + 1, maxAttempts: job.opts.attempts ?? 1, slot: slot.id };
  // Nothing runs before Redis confirmed the lock is this run's. Where this BullMQ's lock layout is
  // known, the move to running renews it in its own step (one command fewer per card); otherwise
  // the first renewal goes out now and travels with the move, whose script checks the lock itself.
  lease.start();
  const renewLockMs = reclaimLockMsFor(deps.lockDurationMs);
  if (renewLockMs === undefined) void lease.confirm();

  const ready = await inSlotSpan(slot.id, () => slot.ready());
  if (controller.signal.aborted || ready.kind !== 'live') {
    // Every way out before the move is taken only under a confirmed lock, as before.
    if (!(await lease.confirm())) return leaseLost(run, context);
    if (controller.signal.aborted) return beforeRunning(run, context, stoppedOutcome(controller, 'sandbox start'));
  }
  if (ready.kind === 'wait') return beforeRunning(run, context, { kind: 'no-sandbox', retryAt: ready.retryAt, reason: ready.reason });
  if (ready.kind === 'misconfigured') return beforeRunning(run, context, { kind: 'misconfigured', reason: ready.reason });
  const handle = ready.handle;
  context.sandboxId = handle.id;
  const runDeps: RunDeps = { handle, newNonce: deps.newNonce, canaryTimeoutMs: deps.lane.canaryTimeoutMs };
  // The move to running goes out first, and the card's files go in while it travels: a reset and a
  // file write (synchronous file work, where the sandbox is this host's), never a command of the
  // card's, in a sandbox only this slot uses. The card's commands still start only once the move is
  // confirmed. Every way out waits for the files, so the slot is released with nothing of this card
  // in flight on its sandbox.
  const move = sendMove(run, context, handle, renewLockMs);
  const previousCardId = slot.swapLastCard(handle, card.id);
  const prepared = prepareCard(runDeps, { card, lane: deps.lane, ...(previousCardId !== undefined ? { previousCardId } : {}) });
  // Handled from now on: it may settle while the move is awaited (runCard reads it later).
  const settled = prepared.catch(() => undefined);
  try {
    return await moveAndRun(run, context, runDeps, prepared, move);
  } finally {
    await settled;
  }
}

/** A move to running on its way, and what its confirmation of the lock depends on. */
interface MoveInFlight {
  toRunning: Extract<CardMove, { to: 'running' }>;
  writer: CardWriter;
  moving: Promise<TransitionResult>;
  /** When it was sent, on the lease's clock: where it renews the lock, the renewal counts from then. */
  sentAtMs: number;
  renewLockMs: number | undefined;
}

/** Sends the move to running (fenced by the run token); where `renewLockMs` is set, it renews the run's lock too. */
function sendMove(run: Run, context: RunContext, handle: SandboxHandle, renewLockMs: number | undefined): MoveInFlight {
  const { deps, card, slot } = run;
  const toRunning = { to: 'running', attempt: context.attempt, sandboxId: handle.id, slot: slot.id, message: `slot ${slot.id}` } as const;
  const writer: CardWriter = renewLockMs === undefined ? run.writer : { ...run.writer, renewLockMs };
  const sentAtMs = deps.monotonicNow();
  return { toRunning, writer, moving: deps.store.transition(card, toRunning, writer), sentAtMs, renewLockMs };
}

/** The move to running's answer, then the card's commands, then the decision. */
async function moveAndRun(run: Run, context: RunContext, runDeps: RunDeps, prepared: Promise<RunOutcome | undefined>, move: MoveInFlight): Promise<unknown> {
  const { deps, job, card, slot, controller, lease, log } = run;
  const { handle } = runDeps;
  const { toRunning, writer, moving, renewLockMs } = move;
  let { sentAtMs } = move;
  // The move's answer is the lock's confirmation where it renews the lock; else the renewal sent at start is.
  const confirmed =
    renewLockMs === undefined
      ? lease.settled()
      : Promise.race([
          moving.then(
            () => true,
            () => true,
          ),
          lease.whenFenced().then(() => false),
        ]);
  if (!(await confirmed)) {
    // Fenced: no waiting for the move (Redis may be away). If it lands, the script has checked the
    // lock; a card left running under this run's token is what a fence right after the move leaves
    // too: the next run takes it over, and the discard's markFenced keeps that off the crash budget.
    moving.catch(() => undefined);
    return leaseLost(run, context);
  }
  let moved = await moving;
  if (!moved.ok && moved.refusal === 'not-found') {
    // A job put on the lane's queue straight through BullMQ, with no record yet.
    await deps.store.create(card);
    sentAtMs = deps.monotonicNow();
    moved = await deps.store.transition(card, toRunning, writer);
  }
  if (moved.ok && renewLockMs !== undefined) lease.renewedBy(sentAtMs);
  if (moved.ok) {
    run.infraRetries = moved.infraRetries;
    log.info({ event: 'card.running', sandboxId: handle.id, attempt: context.attempt, takeover: moved.takeover }, 'card.running');
    rememberRunTrace(deps.redis, card.id, log);
    await deps.replicaAck?.ack();
  }
  // A fence while the move was in flight (Redis away) leaves the card to the run that takes the job next.
  const fencedEarly = lease.fenceDecision()?.reason;
  const start = decideStart({ moved, ...(fencedEarly !== undefined ? { fenced: fencedEarly } : {}), crashedRunsBudget: CRASHED_RUNS_BUDGET });
  switch (start.kind) {
    case 'finished':
      return finished(run, start.state);
    case 'discard':
      return act(run, context, { kind: 'discard', reason: start.reason });
    case 'end':
      return act(run, context, decide(run, context, start.outcome));
    case 'run':
      break;
  }

  const sink = jobLogSink((lines) => appendJobLog(deps.redis, deps.lane.name, job.id ?? card.id, lines, job.opts.keepLogs));
  const result = await runCard(
    runDeps,
    {
      card,
      lane: deps.lane,
      attempt: context.attempt,
      signal: controller.signal,
      answerOutlivesStop: () => controller.signal.reason === ('shutdown' satisfies StopReason),
      onOutput: sink.onOutput,
    },
    prepared,
  );
  sink.flush();
  let outcome: CardOutcome;
  run.finishedAgentRun = isFinishedAgentRun(result);
  const fenced = lease.fenceDecision();
  if (fenced && !run.finishedAgentRun) outcome = { kind: 'fenced', reason: fenced.reason };
  else if (result.kind === 'cancelled') outcome = stoppedOutcome(controller, result.step);
  else if (result.kind === 'provider-outage') {
    const b = (await deps.breaker.failure(result.message)).snapshot;
    if (result.canary) slot.countCardCanary(handle, result.canary);
    outcome = { ...result, ...(b.state === 'open' && b.retryAt ? { breakerRetryAt: b.retryAt } : {}) };
  } else outcome = result;
  const action = decide(run, context, outcome);
  return inResultSpan(action, () => act(run, context, action));
}

/**
 * The agent ran to its end and said how it went (done, needs-human, or its own failure): work paid
 * for in model tokens and minutes, which a lapsed lock alone must not throw away.
 */
function isFinishedAgentRun(result: RunOutcome): boolean {
  return result.kind === 'done' || result.kind === 'needs-human' || (result.kind === 'failed' && result.failedReason === 'command-failed' && result.step === 'agent');
}

function stoppedOutcome(controller: AbortController, step: string): CardOutcome {
  const reason: unknown = controller.signal.reason;
  if (reason === ('fenced' satisfies StopReason)) return { kind: 'fenced', reason: `fenced during ${step}` };
  return { kind: 'stopped', reason: reason === ('shutdown' satisfies StopReason) ? 'shutdown' : 'cancel', step };
}

function decide(run: Run, context: RunContext, outcome: CardOutcome): CardAction {
  return decideCard(outcome, { infraRetries: run.infraRetries }, run.deps.lane, run.deps.now(), context);
}

/** A run that stops before its card moved to running reads the record for the decision (the rare path). */
async function beforeRunning(run: Run, context: RunContext, outcome: CardOutcome): Promise<unknown> {
  const { store } = run.deps;
  const record = (await store.get(run.card.id)) ?? (await store.create(run.card)).record;
  if (isTerminalCardState(record.state)) return finished(run, record.state);
  run.infraRetries = record.infraRetries;
  return act(run, context, decide(run, context, outcome));
}

/**
 * Never run a finished card again. A done card's job is one whose run recorded done but lost its
 * lock before BullMQ heard: complete it, so the queue agrees with the card.
 */
async function finished(run: Run, state: CardState): Promise<unknown> {
  const result = state === 'done' ? (await run.deps.store.get(run.card.id))?.result : undefined;
  return settleEndedJob(answerForEndedCard(run.card.id, { state, result }));
}

/** Carries out the decision: one card move under the run token, then the matching BullMQ move. */
async function act(run: Run, context: RunContext, action: CardAction): Promise<unknown> {
  const { deps, job, card, slot, lease, log, writer } = run;
  // Fenced after the decision: the lock may be someone else's by now. A finished agent run still
  // offers its move: the script writes it only if no other run has taken the card since.
  const fenced = lease.fenceDecision();
  if (action.kind !== 'discard' && fenced && !run.finishedAgentRun) action = { kind: 'discard', reason: fenced.reason };
  const discard = (reason: string): never => {
    log.warn({ event: 'card.discarded', reason, sandboxId: context.sandboxId }, 'card.discarded');
    // Says the run lost its card alive, so the takeover that follows spends no crash budget.
    void bestEffort('mark fenced', () => deps.store.markFenced(card.id, writer.token), warnTo(log));
    // No card move and no BullMQ move: the job's lock lapses and BullMQ hands it on.
    throw new DelayedError();
  };
  if (action.kind === 'discard') return discard(action.reason);
  // A cancel asked for with a reason (a newer card superseded this one) says so in its move.
  if (action.kind === 'cancel') action = withCancelReason(action, await deps.store.cancelReason(card.id));
  const reclaimLockMs = run.finishedAgentRun ? reclaimLockMsFor(deps.lockDurationMs) : undefined;
  const moved = await deps.store.transition(card, action.move, reclaimLockMs ? { ...writer, reclaimLockMs } : writer);
  const markDead = () => {
    if ('markDead' in action && action.markDead) slot.markDead(action.markDead.observedExitCode, action.markDead.message);
  };
  if (!moved.ok) {
    // Refused (and logged by the store as card.stale-write): this run no longer owns the card.
    // What it saw of the sandbox still holds, though.
    markDead();
    return discard(`the card would not move to ${action.move.to} (${moved.refusal})`);
  }
  if (moved.reclaimed) {
    log.warn({ event: 'card.late-commit', to: action.move.to, sandboxId: context.sandboxId, fence: fenced?.reason }, 'card.late-commit');
  }
  log.info({ event: `card.${action.move.to}`, sandboxId: context.sandboxId }, `card.${action.move.to}`);
  await deps.replicaAck?.ack();
  switch (action.kind) {
    case 'complete':
      return action.result;
    case 'retry':
      throw new Error(action.error);
    case 'fail':
      markDead();
      throw new UnrecoverableError(action.error);
    case 'block':
      await job.moveToDelayed(action.move.retryAt, writer.token);
      // Only now respawn: the card is delayed, so the re-drive that follows a live replacement finds it.
      markDead();
      throw new DelayedError();
    case 'hand-back':
      await job.moveToDelayed(deps.now(), writer.token);
      throw new DelayedError();
    case 'cancel':
      throw new UnrecoverableError('cancelled');
  }
}
