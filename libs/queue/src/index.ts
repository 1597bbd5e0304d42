export { QUEUE_PREFIX, STORE_PREFIX, cardIndexPrefix, keys, queueName } from './names.js';
export { createRedis, redactRedisUrl } from './connection.js';
export { CALLBACK_EVENT_TYPES, isCallbackEvent } from './callback-events.js';
export { ackCallbacks, callbackBacklog, callbacksOwed } from './callback-stream.js';
export { EventWindow } from './event-window.js';
export { EventLog, EVENT_STREAM_MAX_LEN, type EventPage, type LanePage, type LatestPage, type ReplayWindow, type StoredEvent, type WindowedPage } from './event-log.js';
export { CardStore, type CardStoreDeps, type CreateOutcome, type TransitionResult, type RetryResult } from './card-store.js';
export { CardList, CARD_LIST_STALE_SKIP_MAX, indexSourcesFor, type CardListDeps, type CardListRequest, type CardListResult } from './card-list.js';
export { decodeCardCursor, encodeCardCursor, filterFingerprint, type CardListCursor, type CardListFilter, type CardListPosition } from './card-cursor.js';
export { renderMove, type CardMove, type CardWriter } from './card-move.js';
export { evaluateRunFence, reclaimLockMsFor, type RunFenceDecision, type RunFenceSnapshot } from './run-fence.js';
export { JOB_LAYOUT_BULLMQ_VERSION, installedBullmqVersion } from './bullmq-job-layout.js';
export { EndedJobDataSchema, endedJobDataFor, type EndedJobData } from './ended-job-data.js';
export { appendJobLog } from './job-log-append.js';
export { CardOutput, trimOutputTail, type OutputBytes, type OutputEntry, type OutputPage, type OutputPosition } from './card-output.js';
export { jobOptions, COMPLETED_JOB_KEEP_COUNT, FAILED_JOB_KEEP_COUNT, RETRY_BASE_DELAY_MS } from './job-options.js';
export { CARD_TRACE_FIELD, cardTrace, rememberCardTrace, withTraceMetadata, withTraceOption } from './job-trace.js';
export {
  LaneQueues,
  REDRIVE_HANDOVER_MS,
  type BlockedEntry,
  type RedriveSelection,
  type LaneQueuesDeps,
  type EnqueueOutcome,
  type EnqueueManyResult,
  type CallbackBacklog,
  type CommandOutcome,
} from './lane-queues.js';
export { describeLaneFull, type LaneFull } from './open-cards.js';
export { FleetStore, SANDBOX_RECORD_TTL_S, type BreakerStatus, type LaneHealth } from './fleet-store.js';
export { CasStore, CAS_MAX_ATTEMPTS } from './cas-store.js';
export { asRedisFullError, isGroupExistsError } from './redis-errors.js';
export {
  ReplicaAck,
  REPLICA_ACK_BACKOFF_MS,
  REPLICA_ACK_TIMEOUT_MS,
  afterReplicaAck,
  replicaAckFor,
  shouldAskReplica,
  type ReplicaAckOutcome,
  type ReplicaAckState,
} from './replica-ack.js';
export {
  evaluateRedisWritable,
  parseInfoMemory,
  type RedisMemoryInfo,
  type RedisWritable,
  type RedisWritableConfig,
  type RedisWritableSnapshot,
} from './redis-memory.js';
export { KeyLimits, KEY_PARK_FIELDS, type KeyAdmission, type KeyedCard } from './key-limit-script.js';
export { takeSharedCards, type CardRate, type CardTake } from './card-rate-bucket.js';
