export { QUEUE_PREFIX, STORE_PREFIX, keys, queueName } from './names.js';
export { createRedis, redactRedisUrl } from './connection.js';
export { EventLog, EVENT_STREAM_MAX_LEN, type StoredEvent } from './event-log.js';
export { CardStore, type CardStoreDeps, type TransitionResult } from './card-store.js';
export { renderMove, type CardMove, type CardWriter } from './card-move.js';
export { jobOptions, COMPLETED_JOB_RETENTION_S, FAILED_JOB_RETENTION_S, RETRY_BASE_DELAY_MS } from './job-options.js';
export { LaneQueues, type LaneQueuesDeps, type EnqueueOutcome, type CommandOutcome } from './lane-queues.js';
export { FleetStore, type BreakerStatus, type LaneHealth } from './fleet-store.js';
export { CasStore, CAS_MAX_ATTEMPTS } from './cas-store.js';
