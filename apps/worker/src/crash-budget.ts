/**
 * How many runs of one card may vanish (taken over while their worker never said it had fenced
 * itself) before the card fails. A worker that crashes on a card again and again ends it here.
 */
export const CRASHED_RUNS_BUDGET = 5;

export type CrashBudgetDecision = { action: 'run'; reason: string } | { action: 'fail'; reason: string };

/**
 * Outages do not spend this budget: a worker that lost its lock alive (Redis away, a partition)
 * fences itself and says so (`markFenced`), so only runs that ended with their worker count.
 */
export function evaluateCrashBudget(card: { crashSuspects: number }, config: { crashedRunsBudget: number }): CrashBudgetDecision {
  const { crashSuspects } = card;
  const budget = config.crashedRunsBudget;
  if (crashSuspects > budget) return { action: 'fail', reason: `${crashSuspects} runs of this card vanished with their worker (budget ${budget})` };
  return { action: 'run', reason: `${crashSuspects} of ${budget} vanished runs spent` };
}
