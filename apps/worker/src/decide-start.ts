import { isTerminalCardState, type CardState } from '@lanes/contracts';
import type { TransitionResult } from '@lanes/queue';
import { evaluateCrashBudget } from './crash-budget.js';
import type { CardOutcome } from './decide-card.js';

/** What the run saw of its move to running: the move's answer, and a fence that came meanwhile. */
export interface StartSnapshot {
  moved: TransitionResult;
  /** The run lost its lock while the move was in flight (Redis away). */
  fenced?: string;
  crashedRunsBudget: number;
}

/** Whether the card's commands start, and if not, how the run ends. */
export type StartDecision =
  | { kind: 'run'; reason: string }
  /** The card ended before this run: never run a finished card again. */
  | { kind: 'finished'; state: CardState }
  /** No card move and no BullMQ move: the run that holds the lock now owns the card. */
  | { kind: 'discard'; reason: string }
  /** The run ends before it starts anything, by the card decision of this outcome. */
  | { kind: 'end'; outcome: CardOutcome };

/**
 * The start of a run, after its move to running (the record made first when a board added the job
 * itself). Pure; the processor carries it out.
 *
 * | the move                    | then                                  | decision                      |
 * |-----------------------------|---------------------------------------|-------------------------------|
 * | refused, card terminal      |                                       | finished                      |
 * | refused otherwise           |                                       | discard                       |
 * | made                        | fenced while it was in flight         | discard                       |
 * | made                        | a cancel was asked for meanwhile      | end: stopped (cancel) at start|
 * | made, a takeover            | vanished runs past the crash budget   | end: crash budget spent       |
 * | made                        | none of the above                     | run                           |
 */
export function decideStart(s: StartSnapshot): StartDecision {
  const { moved } = s;
  if (!moved.ok) {
    if (moved.refusal === 'illegal' && moved.state && isTerminalCardState(moved.state)) return { kind: 'finished', state: moved.state };
    return { kind: 'discard', reason: `the card would not move to running (${moved.refusal}, ${moved.state ?? 'no record'})` };
  }
  if (s.fenced !== undefined) return { kind: 'discard', reason: s.fenced };
  // A cancel answered while no run heard it (a retry's wait, a missed message): nothing starts.
  if (moved.cancelRequested) return { kind: 'end', outcome: { kind: 'stopped', reason: 'cancel', step: 'start' } };
  if (moved.takeover) {
    const budget = evaluateCrashBudget(moved, { crashedRunsBudget: s.crashedRunsBudget });
    if (budget.action === 'fail') return { kind: 'end', outcome: { kind: 'crash-budget-spent', reason: budget.reason } };
  }
  return { kind: 'run', reason: moved.takeover ? 'a takeover within the crash budget' : 'moved to running' };
}
