export { runCard, prepareCard, NEEDS_HUMAN_EXIT_CODE, type RunInput, type RunDeps } from './run-card.js';
export type { RunOutcome, Step } from './run-outcome.js';
export { cardPaths, type CardPaths } from './card-paths.js';
export { cardEnv } from './card-env.js';
export { checkedExec, checkedCall, execOutcome, probe, runCanary, errorKind, type CheckedCommand, type CheckDeps } from './command-check.js';
