import { DelayedError, UnrecoverableError, type Job } from 'bullmq';
import type { Logger } from 'pino';
import { isTerminalCardState, type Card, type CardRecord, type LaneConfig } from '@lanes/contracts';
import type { CardStore, Transition } from '@lanes/queue';
import { runCard, type RunOutcome } from '@lanes/runner';
import { evaluateInfraRetry } from '@lanes/supervision';
import { cardFromJob } from './card-from-job.js';
import { jobLogSink } from './job-log.js';
import type { LaneBreaker } from './lane-breaker.js';
import type { Slot } from './slot.js';
import type { SlotPool } from './slot-pool.js';

/** A needs-human card waits as a delayed job until unblocked; a year is "until a person acts". */
export const NEEDS_HUMAN_HOLD_MS = 365 * 24 * 3_600_000;
/** Backstop for a sandbox-dead card: re-driven at once when a replacement is live, else when this passes. */
export const SANDBOX_DEAD_BACKSTOP_MS = 30_000;

export type StopReason = 'cancel' | 'shutdown';

export interface ProcessorDeps {
  lane: LaneConfig;
  store: CardStore;
  pool: SlotPool;
  breaker: LaneBreaker;
  log: Logger;
  now: () => number;
  newNonce: () => string;
  /** Running cards by id, so a cancel or a shutdown can stop them. */
  running: Map<string, AbortController>;
}

/** The BullMQ processor of one lane: validate, take a slot, run the card, and act on what the supervisor read. */
export function createProcessor(deps: ProcessorDeps) {
  return async function processCard(job: Job, token?: string): Promise<unknown> {
    const { lane, store, log: baseLog } = deps;
    let card: Card;
    try {
      card = cardFromJob(job, lane.name);
    } catch (err) {
      baseLog.warn({ jobId: job.id, err: String(err), event: 'card.invalid' }, 'card.invalid');
      throw err;
    }
    const log = baseLog.child({ cardId: card.id });
    const record = (await store.get(card.id)) ?? (await store.create(card)).record;
    if (isTerminalCardState(record.state)) {
      // Cancelled while it was being handed over; never run a finished card again.
      throw new UnrecoverableError(`card ${card.id} is already ${record.state}`);
    }
    // Registered before the slot is ready, so a cancel or shutdown while waiting for a sandbox is not lost.
    const controller = new AbortController();
    deps.running.set(card.id, controller);
    const slot = deps.pool.take(card.id);
    try {
      return await runInSlot(deps, job, token, card, record, slot, controller, log.child({ slot: slot.id }));
    } finally {
      deps.running.delete(card.id);
      deps.pool.release(slot);
    }
  };
}

async function runInSlot(
  deps: ProcessorDeps,
  job: Job,
  token: string | undefined,
  card: Card,
  record: CardRecord,
  slot: Slot,
  controller: AbortController,
  log: Logger,
): Promise<unknown> {
  const { lane, store, now } = deps;
  const attempt = job.attemptsMade + 1;
  const block = async (t: Omit<Transition, 'state' | 'attempt'> & { retryAt: number }): Promise<never> => {
    await store.transition(card, { ...t, state: 'blocked', attempt, slot: slot.id });
    await job.moveToDelayed(t.retryAt, token);
    log.info({ event: 'card.blocked', blockedReason: t.blockedReason, retryAt: new Date(t.retryAt).toISOString() }, 'card.blocked');
    throw new DelayedError();
  };

  const stopped = async (step: string): Promise<never> => {
    if (controller.signal.reason === ('shutdown' satisfies StopReason)) {
      await store.transition(card, { state: 'queued', attempt, slot: slot.id, message: 'handed back on shutdown' });
      await job.moveToDelayed(now(), token);
      throw new DelayedError();
    }
    await store.transition(card, { state: 'cancelled', attempt, slot: slot.id, message: `cancelled during ${step}` });
    log.info({ event: 'card.cancelled' }, 'card.cancelled');
    throw new UnrecoverableError('cancelled');
  };

  const ready = await slot.ready();
  if (controller.signal.aborted) return stopped('sandbox start');
  if (ready.kind === 'wait') {
    return block({ blockedReason: 'provider-outage', verdict: 'provider-outage', message: ready.reason, retryAt: ready.retryAt });
  }
  const handle = ready.handle;
  await store.transition(card, { state: 'running', attempt, sandboxId: handle.id, slot: slot.id, message: `slot ${slot.id}` });
  log.info({ event: 'card.running', sandboxId: handle.id, attempt }, 'card.running');

  const sink = jobLogSink(job);
  const outcome: RunOutcome = await runCard(
    { handle, newNonce: deps.newNonce, canaryTimeoutMs: lane.canaryTimeoutMs },
    { card, lane, attempt, signal: controller.signal, onOutput: sink.onOutput },
  );
  sink.flush();
  const base = { sandboxId: handle.id, slot: slot.id };

  switch (outcome.kind) {
    case 'done':
      await store.transition(card, { ...base, state: 'done', attempt, verdict: 'ok', result: outcome.result, exitCode: 0 });
      log.info({ event: 'card.done' }, 'card.done');
      return outcome.result ?? null;

    case 'needs-human':
      return block({ ...base, blockedReason: 'needs-human', exitCode: outcome.exitCode, message: outcome.reason, retryAt: now() + NEEDS_HUMAN_HOLD_MS });

    case 'failed': {
      const final = attempt >= (job.opts.attempts ?? 1);
      const message = `attempt ${attempt} failed: ${outcome.message}`;
      if (final) {
        await store.transition(card, { ...base, state: 'failed', attempt, verdict: 'command-failed', failedReason: outcome.failedReason, exitCode: outcome.exitCode, message });
        log.warn({ event: 'card.failed', reason: outcome.message }, 'card.failed');
        throw new UnrecoverableError(message);
      }
      await store.transition(card, { ...base, state: 'queued', attempt, verdict: 'command-failed', exitCode: outcome.exitCode, message: `${message}; retrying` });
      throw new Error(message);
    }

    case 'cancelled':
      return stopped(outcome.step);

    case 'sandbox-dead': {
      const budget = evaluateInfraRetry({ infraRetries: record.infraRetries }, lane.infraRetries);
      const diag = { ...base, verdict: 'sandbox-dead' as const, observedExitCode: outcome.observedExitCode };
      if (budget.action === 'fail') {
        await store.transition(card, { ...diag, state: 'failed', attempt, failedReason: 'infra', message: `${budget.reason}; last: ${outcome.message}` });
        slot.markDead(outcome.observedExitCode, outcome.message);
        log.warn({ event: 'card.failed', failedReason: 'infra' }, 'card.failed');
        throw new UnrecoverableError(`infra retries exhausted: ${outcome.message}`);
      }
      const retryAt = now() + SANDBOX_DEAD_BACKSTOP_MS;
      await store.transition(card, { ...diag, state: 'blocked', attempt, blockedReason: 'sandbox-dead', infraRetries: budget.infraRetries, message: outcome.message, retryAt });
      await job.moveToDelayed(retryAt, token);
      // Only now respawn: the card is delayed, so the re-drive that follows a live replacement finds it.
      slot.markDead(outcome.observedExitCode, outcome.message);
      throw new DelayedError();
    }

    case 'provider-outage': {
      const b = (await deps.breaker.failure(outcome.message)).snapshot;
      const retryAt = b.state === 'open' && b.retryAt ? b.retryAt : now() + lane.breaker.openMs;
      return block({ ...base, blockedReason: 'provider-outage', verdict: 'provider-outage', message: outcome.message, retryAt });
    }
  }
}
