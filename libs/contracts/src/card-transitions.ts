import { CardStateSchema, isTerminalCardState, type CardState } from './card-state.js';

/**
 * Every move a card may make, and nothing else. The Redis transition script enforces this table,
 * so a write from a stale or confused caller cannot put a card where it could never be.
 *
 * - queued → queued: a re-drive or a hand-back that finds the card already queued (idempotent).
 * - queued | blocked → running: a run takes the card.
 * - running → running: a takeover, a new run replacing one that never ended (its worker crashed
 *   or was fenced); the new run's token replaces the old one.
 * - running → queued: a retry after a failed attempt, or a graceful hand-back on shutdown.
 * - queued | blocked → blocked: a run found no sandbox to run on (provider outage).
 * - blocked → queued: re-drive or unblock.
 * - queued | blocked → cancelled: cancelled before it ran.
 * - failed | cancelled → queued: a retry (`POST /v1/cards/:id/retry`), and only a retry: it is the
 *   one `retry` move (legalSourcesOf(to, 'retry')). Every other move leaves a terminal card as it is.
 * - done, failed, cancelled are terminal: a run ends once. Done has no exit; a retried card starts
 *   a new run, so its history holds one ending per run, each but the last followed by the retry.
 */
export const CARD_TRANSITIONS: Readonly<Record<CardState, readonly CardState[]>> = {
  queued: ['queued', 'running', 'blocked', 'cancelled'],
  running: ['running', 'queued', 'blocked', 'done', 'failed', 'cancelled'],
  blocked: ['queued', 'running', 'blocked', 'cancelled'],
  done: [],
  failed: ['queued'],
  cancelled: ['queued'],
};

/**
 * What kind of move a writer makes. `progress`: every move of a card's run (a run, a re-drive, a
 * cancel, an unblock); never out of a terminal state. `retry`: a finished card queued again; only
 * out of a terminal state.
 */
export type CardMoveKind = 'progress' | 'retry';

export function isLegalCardTransition(from: CardState, to: CardState): boolean {
  return CARD_TRANSITIONS[from].includes(to);
}

/** The states a retry takes a card from: failed and cancelled. */
export function isRetryableCardState(state: CardState): boolean {
  return isTerminalCardState(state) && isLegalCardTransition(state, 'queued');
}

/**
 * The states a card may be in for a move to `to` of this kind: what the transition script checks
 * atomically. A progress move never leaves a terminal state; a retry leaves nothing else.
 */
export function legalSourcesOf(to: CardState, kind: CardMoveKind = 'progress'): CardState[] {
  return CardStateSchema.options.filter((from) => isLegalCardTransition(from, to) && isTerminalCardState(from) === (kind === 'retry'));
}
