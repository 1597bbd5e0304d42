export { createWorkerApp, type WorkerApp, type WorkerAppOptions } from './worker-app.js';
export { LaneWorker, DEFAULT_LOCK_DURATION_MS, UNLIMITED_STALLS } from './lane-worker.js';
export { decideCard, type CardAction, type CardOutcome, type RunContext } from './decide-card.js';
export { evaluateLease, fenceMarginFor, type LeaseDecision, type LeaseSnapshot } from './lease.js';
export { evaluateCrashBudget, CRASHED_RUNS_BUDGET } from './crash-budget.js';
export { NEEDS_HUMAN_HOLD_MS, SANDBOX_DEAD_BACKSTOP_MS } from './decide-card.js';
export type { SlotState } from './slot.js';
export { cardFromJob } from './card-from-job.js';
export { jobLogSink, JOB_LOG_MAX_LINES, type JobLogWrite } from './job-log.js';
