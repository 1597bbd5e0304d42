import type { Card, LaneConfig } from '@lanes/contracts';
import type { CardPaths } from './card-paths.js';

/**
 * The agent protocol's environment. Card text travels only here and in the card file,
 * never inside a shell string.
 */
export function cardEnv(card: Card, lane: Pick<LaneConfig, 'name' | 'env'>, paths: CardPaths, attempt: number): Record<string, string> {
  const env: Record<string, string> = {
    ...lane.env,
    LANES_CARD_ID: card.id,
    LANES_CARD_FILE: paths.cardFile,
    LANES_OUTPUT_DIR: paths.outputDir,
    LANES_WORK_DIR: paths.workDir,
    LANES_LANE: lane.name,
    LANES_ATTEMPT: String(attempt),
    LANES_CARD_TITLE: card.title,
  };
  if (card.repo) env.LANES_CARD_REPO = card.repo;
  if (card.pr) {
    env.LANES_PR_NUMBER = String(card.pr.number);
    env.LANES_PR_BRANCH = card.pr.branch;
    if (card.pr.base) env.LANES_PR_BASE = card.pr.base;
  }
  return env;
}

/**
 * A command's environment with TRACEPARENT (W3C trace context) naming the card's trace and the
 * command's span, so an agent that traces joins the card's trace. Added here on purpose, past the
 * allow-list of the worker's own environment (agent-env.ts in @lanes/sandbox): a TRACEPARENT the
 * worker itself was started with never reaches an agent. Unchanged without one (tracing off).
 */
export function withTraceparent(env: Record<string, string>, traceparent: string | undefined): Record<string, string> {
  return traceparent === undefined ? env : { ...env, TRACEPARENT: traceparent };
}
