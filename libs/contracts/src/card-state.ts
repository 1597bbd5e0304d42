import { z } from 'zod';

/** queued → running → done | failed | cancelled | blocked */
export const CardStateSchema = z.enum(['queued', 'running', 'done', 'failed', 'cancelled', 'blocked']);
export type CardState = z.infer<typeof CardStateSchema>;

/** Why a blocked card waits: the first two clear by themselves, the last needs a person. */
export const BlockedReasonSchema = z.enum(['sandbox-dead', 'provider-outage', 'needs-human']);
export type BlockedReason = z.infer<typeof BlockedReasonSchema>;

/** Why a failed card failed: its own command, or infrastructure that ran out of retries. */
export const FailedReasonSchema = z.enum(['command-failed', 'infra', 'invalid', 'timeout']);
export type FailedReason = z.infer<typeof FailedReasonSchema>;

const TERMINAL: ReadonlySet<CardState> = new Set(['done', 'failed', 'cancelled']);
export function isTerminalCardState(state: CardState): boolean {
  return TERMINAL.has(state);
}
