export { QUEUE_PREFIX, STORE_PREFIX, keys, queueName } from './names.js';
export { createRedis, redactRedisUrl } from './connection.js';
export { CALLBACK_EVENT_TYPES, isCallbackEvent } from './callback-events.js';
export { ackCallbacks, callbackBacklog } from './callback-stream.js';
export { EventWindow } from './event-window.js';
export { EventLog, EVENT_STREAM_MAX_LEN, type EventPage, type StoredEvent } from './event-log.js';
export { CardStore, type CardStoreDeps, type CreateOutcome, type TransitionResult } from './card-store.js';
export { renderMove, type CardMove, type CardWriter } from './card-move.js';
export { evaluateRunFence, reclaimLockMsFor, type RunFenceDecision, type RunFenceSnapshot } from './run-fence.js';
export { JOB_LAYOUT_BULLMQ_VERSION, installedBullmqVersion } from './bullmq-job-layout.js';
export { appendJobLog } from './job-log-append.js';
export { jobOptions, COMPLETED_JOB_KEEP_COUNT, FAILED_JOB_KEEP_COUNT, RETRY_BASE_DELAY_MS } from './job-options.js';
export { LaneQueues, type LaneQueuesDeps, type EnqueueOutcome, type EnqueueManyResult, type CallbackBacklog, type CommandOutcome } from './lane-queues.js';
export { FleetStore, type BreakerStatus, type LaneHealth } from './fleet-store.js';
export { CasStore, CAS_MAX_ATTEMPTS } from './cas-store.js';
export { asRedisFullError } from './redis-errors.js';
export {
  evaluateRedisWritable,
  parseInfoMemory,
  type RedisMemoryInfo,
  type RedisWritable,
  type RedisWritableConfig,
  type RedisWritableSnapshot,
} from './redis-memory.js';
