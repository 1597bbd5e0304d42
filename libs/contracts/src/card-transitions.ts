import { CardStateSchema, type CardState } from './card-state.js';

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
 * - done, failed, cancelled are terminal: no exits, so no history holds two terminal entries.
 */
export const CARD_TRANSITIONS: Readonly<Record<CardState, readonly CardState[]>> = {
  queued: ['queued', 'running', 'blocked', 'cancelled'],
  running: ['running', 'queued', 'blocked', 'done', 'failed', 'cancelled'],
  blocked: ['queued', 'running', 'blocked', 'cancelled'],
  done: [],
  failed: [],
  cancelled: [],
};

export function isLegalCardTransition(from: CardState, to: CardState): boolean {
  return CARD_TRANSITIONS[from].includes(to);
}

/** The states a card may be in for a move to `to`: what the transition script checks atomically. */
export function legalSourcesOf(to: CardState): CardState[] {
  return CardStateSchema.options.filter((from) => isLegalCardTransition(from, to));
}
