export { createWorkerApp, type WorkerApp, type WorkerAppOptions } from './worker-app.js';
export { LaneWorker, MAX_STALLED_COUNT } from './lane-worker.js';
export { NEEDS_HUMAN_HOLD_MS, SANDBOX_DEAD_BACKSTOP_MS } from './processor.js';
export type { SlotState } from './slot.js';
export { cardFromJob } from './card-from-job.js';
