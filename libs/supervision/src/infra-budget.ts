/**
 * Decision for one more infrastructure failure (sandbox-dead, provider-outage) of a card.
 * `infraRetries` on the card counts the infra failures already answered with a block.
 */
export type InfraRetryDecision = { action: 'block'; infraRetries: number; reason: string } | { action: 'fail'; failedReason: 'infra'; infraRetries: number; reason: string };

/**
 * A card may be blocked (and later re-driven) for infrastructure `budget` times; the next infra
 * failure fails it, so no card loops forever. Precisely: with `card.infraRetries` blocks already
 * spent, block while infraRetries < budget (returning infraRetries + 1), else fail.
 * Budget 3: infra failures 1, 2, 3 block (infraRetries → 1, 2, 3); the 4th fails the card.
 * Budget 0: the first infra failure fails. These blocks do not consume BullMQ attempts.
 */
export function evaluateInfraRetry(card: { infraRetries: number }, budget: number): InfraRetryDecision {
  const spent = card.infraRetries;
  if (spent < budget) {
    return { action: 'block', infraRetries: spent + 1, reason: `infra retry ${spent + 1} of ${budget}` };
  }
  return {
    action: 'fail',
    failedReason: 'infra',
    infraRetries: spent,
    reason: `infra retry budget exhausted (${spent} of ${budget} used)`,
  };
}
