import type { CardRecord, LaneConfig, ObservedExitCode } from '@lanes/contracts';
import type { CardMove } from '@lanes/queue';
import type { RunOutcome } from '@lanes/runner';
import { evaluateInfraRetry } from '@lanes/supervision';

/** A needs-human card waits as a delayed job until unblocked; a year is "until a person acts". */
export const NEEDS_HUMAN_HOLD_MS = 365 * 24 * 3_600_000;
/** Backstop for a sandbox-dead card: re-driven at once when a replacement is live, else when this passes. */
export const SANDBOX_DEAD_BACKSTOP_MS = 30_000;

/** Why a run was told to stop: a user's cancel, a graceful shutdown, or the loss of its lock. */
export type StopReason = 'cancel' | 'shutdown' | 'fenced';

/** Everything a run of a card can come to, as the processor saw it. */
export type CardOutcome =
  | Exclude<RunOutcome, { kind: 'cancelled' | 'provider-outage' }>
  /** The breaker's reopen time is read by the shell (it counts the failure) and passed in. */
  | { kind: 'provider-outage'; message: string; step: string; breakerRetryAt?: number }
  /** No sandbox to run on: the slot waits for the provider. */
  | { kind: 'no-sandbox'; retryAt: number; reason: string }
  | { kind: 'stopped'; reason: Exclude<StopReason, 'fenced'>; step: string }
  /** The lane's config cannot make a sandbox: the card waits for a person, as needs-human. */
  | { kind: 'misconfigured'; reason: string }
  /** The run lost its lock: whatever it produced belongs to no one. */
  | { kind: 'fenced'; reason: string }
  /** Too many runs of the card vanished with their worker (crash-budget.ts): it fails, as an infra failure. */
  | { kind: 'crash-budget-spent'; reason: string };

export interface RunContext {
  /** 1-based BullMQ attempt of this run, and how many the job has. */
  attempt: number;
  maxAttempts: number;
  slot: string;
  /** The sandbox the card ran on, when it got that far. */
  sandboxId?: string;
}

/** What to do with the outcome. Every action but `discard` is one card move, then one BullMQ move. */
export type CardAction =
  | { kind: 'complete'; move: Extract<CardMove, { to: 'done' }>; result: unknown }
  /** Record queued, then fail the BullMQ attempt so BullMQ retries it with backoff. */
  | { kind: 'retry'; move: Extract<CardMove, { to: 'queued' }>; error: string }
  | { kind: 'fail'; move: Extract<CardMove, { to: 'failed' }>; error: string; markDead?: SandboxDeath }
  /** Record blocked, then move the job to delayed until `move.retryAt`. */
  | { kind: 'block'; move: Extract<CardMove, { to: 'blocked' }>; markDead?: SandboxDeath }
  /** Graceful shutdown, or an exec that failed in transport: record queued and make the job waiting again, no attempt spent. */
  | { kind: 'hand-back'; move: Extract<CardMove, { to: 'queued' }> }
  | { kind: 'cancel'; move: Extract<CardMove, { to: 'cancelled' }> }
  /** Fenced: no card move and no BullMQ move; the run that holds the lock now owns the card. */
  | { kind: 'discard'; reason: string };

export interface SandboxDeath {
  observedExitCode: ObservedExitCode;
  message: string;
}

/** The processor's policy: from a run's outcome and the card's record to one action. Pure. */
export function decideCard(
  outcome: CardOutcome,
  record: Pick<CardRecord, 'infraRetries'>,
  lane: Pick<LaneConfig, 'infraRetries' | 'breaker'>,
  nowMs: number,
  run: RunContext,
): CardAction {
  const where = { attempt: run.attempt, slot: run.slot, ...(run.sandboxId !== undefined ? { sandboxId: run.sandboxId } : {}) };
  switch (outcome.kind) {
    case 'fenced':
      return { kind: 'discard', reason: outcome.reason };
    case 'crash-budget-spent':
      return { kind: 'fail', move: { ...where, to: 'failed', failedReason: 'infra', message: outcome.reason }, error: outcome.reason };
    case 'done':
      return { kind: 'complete', move: { ...where, to: 'done', result: outcome.result, exitCode: 0 }, result: outcome.result ?? null };
    case 'needs-human':
      return {
        kind: 'block',
        move: { ...where, to: 'blocked', blockedReason: 'needs-human', exitCode: outcome.exitCode, message: outcome.reason, retryAt: nowMs + NEEDS_HUMAN_HOLD_MS },
      };
    case 'failed': {
      const message = `attempt ${run.attempt} failed: ${outcome.message}`;
      const diag = { verdict: 'command-failed' as const, ...(outcome.exitCode !== undefined ? { exitCode: outcome.exitCode } : {}) };
      if (run.attempt >= run.maxAttempts) {
        return { kind: 'fail', move: { ...where, ...diag, to: 'failed', failedReason: outcome.failedReason, message }, error: message };
      }
      return { kind: 'retry', move: { ...where, ...diag, to: 'queued', message: `${message}; retrying` }, error: message };
    }
    case 'stopped':
      if (outcome.reason === 'shutdown') return { kind: 'hand-back', move: { ...where, to: 'queued', message: 'handed back on shutdown' } };
      return { kind: 'cancel', move: { ...where, to: 'cancelled', message: `cancelled during ${outcome.step}` } };
    case 'sandbox-dead': {
      const budget = evaluateInfraRetry(record, lane.infraRetries);
      const death = { observedExitCode: outcome.observedExitCode, message: outcome.message };
      const diag = { verdict: 'sandbox-dead' as const, observedExitCode: outcome.observedExitCode };
      if (budget.action === 'fail') {
        const move = { ...where, ...diag, to: 'failed' as const, failedReason: 'infra' as const, message: `${budget.reason}; last: ${outcome.message}` };
        return { kind: 'fail', move, error: `infra retries exhausted: ${outcome.message}`, markDead: death };
      }
      const move = {
        ...where,
        ...diag,
        to: 'blocked' as const,
        blockedReason: 'sandbox-dead' as const,
        infraRetries: budget.infraRetries,
        message: outcome.message,
        retryAt: nowMs + SANDBOX_DEAD_BACKSTOP_MS,
      };
      return { kind: 'block', move, markDead: death };
    }
    case 'interrupted': {
      // The command's fate is unknown, not failed: no attempt is spent, but an infra retry is, so a
      // flapping transport cannot loop a card forever.
      const budget = evaluateInfraRetry(record, lane.infraRetries);
      if (budget.action === 'fail') {
        const move = { ...where, to: 'failed' as const, failedReason: 'infra' as const, message: `${budget.reason}; last: ${outcome.message}` };
        return { kind: 'fail', move, error: `infra retries exhausted: ${outcome.message}` };
      }
      return { kind: 'hand-back', move: { ...where, to: 'queued', infraRetries: budget.infraRetries, message: `re-run, no attempt spent: ${outcome.message}` } };
    }
    case 'provider-outage':
      return {
        kind: 'block',
        move: {
          ...where,
          to: 'blocked',
          blockedReason: 'provider-outage',
          verdict: 'provider-outage',
          message: outcome.message,
          retryAt: outcome.breakerRetryAt ?? nowMs + lane.breaker.openMs,
        },
      };
    case 'misconfigured':
      // Not the provider's fault and not the card's: no breaker, no attempt; a person fixes the
      // config and unblocks the card, so nothing is lost.
      return { kind: 'block', move: { ...where, to: 'blocked', blockedReason: 'needs-human', message: outcome.reason, retryAt: nowMs + NEEDS_HUMAN_HOLD_MS } };
    case 'no-sandbox':
      return {
        kind: 'block',
        move: { ...where, to: 'blocked', blockedReason: 'provider-outage', verdict: 'provider-outage', message: outcome.reason, retryAt: outcome.retryAt },
      };
  }
}

/** A cancel's move with the reason it was asked for, when it was more than a plain cancel (`superseded by <id>`). */
export function withCancelReason(action: Extract<CardAction, { kind: 'cancel' }>, reason: string | undefined): Extract<CardAction, { kind: 'cancel' }> {
  return reason === undefined ? action : { ...action, move: { ...action.move, message: `${action.move.message}: ${reason}` } };
}
