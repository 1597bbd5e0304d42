import {
  HistoryEntrySchema,
  type BlockedReason,
  type EventType,
  type FailedReason,
  type HistoryEntry,
  type LaneEvent,
  type ObservedExitCode,
  type Verdict,
} from '@lanes/contracts';
import { CANCEL_REASON_FIELD, CANCEL_REQUESTED_FIELD } from './card-script.js';

/** Where the move happened, for the event and the logs. */
interface Where {
  attempt: number;
  slot?: string;
  sandboxId?: string;
  message?: string;
}

/** One move of a card, typed by the state it goes to: each target carries what it needs and no more. */
export type CardMove =
  | (Where & {
      to: 'queued';
      /**
       * `card.retried`: a finished (failed or cancelled) card queued again, the one move out of a
       * terminal state (CardStore.retry). Its `attempt` and `infraRetries` start the new run's count
       * (0), and what the last run left that would speak for the next (its failed reason, a result,
       * a cancel request) is cleared.
       */
      event?: 'card.queued' | 'card.redriven' | 'card.unblocked' | 'card.retried';
      verdict?: Verdict;
      exitCode?: number;
      /** New infra-retry count, when a re-run spends one instead of an attempt. */
      infraRetries?: number;
    })
  | (Where & { to: 'running'; sandboxId: string })
  | (Where & { to: 'done'; result?: unknown; exitCode?: number })
  | (Where & { to: 'failed'; failedReason: FailedReason; verdict?: Verdict; exitCode?: number; observedExitCode?: ObservedExitCode })
  | (Where & { to: 'cancelled' })
  | (Where & {
      to: 'blocked';
      blockedReason: BlockedReason;
      retryAt: number;
      verdict?: Verdict;
      exitCode?: number;
      observedExitCode?: ObservedExitCode;
      /** New infra-retry count, when this block spends one. */
      infraRetries?: number;
    });

/** Who writes, and so what the transition script checks before it lets the move through. */
export type CardWriter =
  /**
   * A run holding BullMQ's lock of the card's job under `token`: the run token. `reclaimLockMs`: a
   * run with a finished agent run in hand takes a lapsed lock back for this long, if no other run
   * has taken the card since (evaluateRunFence). `renewLockMs`: a move into running renews the
   * run's lock for this long in the same step, as BullMQ's extendLock does (the run's first lease
   * renewal; `reclaimLockMsFor` says whether this BullMQ's lock layout allows it).
   */
  | { kind: 'run'; token: string; reclaimLockMs?: number; renewLockMs?: number }
  /** API or supervisor: may not move a card out of `running`. */
  | { kind: 'board' }
  /** API: out of `running` only if the run it read (`token`) is still the card's run. */
  | { kind: 'board-if-run'; token: string };

/** The hash fields, history entry and event one move writes; the script applies them together. */
export interface RenderedMove {
  set: Record<string, string>;
  del: string[];
  entry: HistoryEntry;
  event: LaneEvent;
}

/** The diagnostic fields of a move, the same for its history entry, its event and the record. */
function details(move: CardMove): Omit<HistoryEntry, 'at' | 'state' | 'attempt' | 'sandboxId' | 'message'> {
  switch (move.to) {
    case 'queued':
      return { verdict: move.verdict, exitCode: move.exitCode };
    case 'running':
    case 'cancelled':
      return {};
    case 'done':
      return { verdict: 'ok', exitCode: move.exitCode };
    case 'failed':
      return { failedReason: move.failedReason, verdict: move.verdict, exitCode: move.exitCode, observedExitCode: move.observedExitCode };
    case 'blocked':
      return {
        blockedReason: move.blockedReason,
        verdict: move.verdict,
        exitCode: move.exitCode,
        observedExitCode: move.observedExitCode,
        retryAt: new Date(move.retryAt).toISOString(),
      };
  }
}

function defined<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

export function renderMove(card: { id: string; lane: string }, move: CardMove, atMs: number): RenderedMove {
  const at = new Date(atMs).toISOString();
  const d = details(move);
  const entry = HistoryEntrySchema.parse(defined({ at, state: move.to, attempt: move.attempt, sandboxId: move.sandboxId, ...d, message: move.message }));
  const set: Record<string, string> = { state: move.to, updatedAt: at, attempts: String(move.attempt) };
  if (move.sandboxId !== undefined) set.sandboxId = move.sandboxId;
  if (d.observedExitCode !== undefined) set.observedExitCode = JSON.stringify(d.observedExitCode);
  const del: string[] = [];
  switch (move.to) {
    case 'done':
      if (move.result !== undefined) set.result = JSON.stringify(move.result);
      break;
    case 'failed':
      set.failedReason = move.failedReason;
      break;
    case 'blocked':
      set.blockedReason = move.blockedReason;
      set.blockedMessage = move.message ?? '';
      break;
  }
  if ((move.to === 'blocked' || move.to === 'queued') && move.infraRetries !== undefined) set.infraRetries = String(move.infraRetries);
  if (move.to !== 'blocked') del.push('blockedReason', 'blockedMessage');
  if (move.to === 'queued' && move.event === 'card.retried') del.push('failedReason', 'result', CANCEL_REQUESTED_FIELD, CANCEL_REASON_FIELD);
  const type: EventType = move.to === 'queued' && move.event ? move.event : `card.${move.to}`;
  const { retryAt: _retryAt, exitCode: _exitCode, ...eventData } = d;
  const event: LaneEvent = {
    type,
    at,
    lane: card.lane,
    cardId: card.id,
    ...defined({ slot: move.slot, sandboxId: move.sandboxId }),
    data: defined({ ...eventData, message: move.message }),
  };
  return { set, del, entry, event };
}
