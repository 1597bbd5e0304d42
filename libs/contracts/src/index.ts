export {
  CARD_ID_PATTERN,
  LANE_NAME_PATTERN,
  gitRefProblem,
  MAX_CARD_PRIORITY,
  CardIdSchema,
  LaneNameSchema,
  PullRequestSchema,
  CardInputSchema,
  CardSchema,
  type CardInput,
  type Card,
} from './card.js';
export {
  CardStateSchema,
  BlockedReasonSchema,
  FailedReasonSchema,
  isTerminalCardState,
  type CardState,
  type BlockedReason,
  type FailedReason,
} from './card-state.js';
export { CARD_TRANSITIONS, isLegalCardTransition, isRetryableCardState, legalSourcesOf, type CardMoveKind } from './card-transitions.js';
export {
  SandboxStateSchema,
  ObservedExitCodeSchema,
  VerdictSchema,
  PollResultSchema,
  SandboxInfoSchema,
  SandboxTagsSchema,
  SandboxSpecSchema,
  FileSyncSchema,
  SandboxRecordSchema,
  type SandboxRecord,
  type SandboxState,
  type ObservedExitCode,
  type Verdict,
  type PollResult,
  type SandboxInfo,
  type SandboxTags,
  type SandboxSpec,
  type FileSync,
} from './sandbox.js';
export { TokenRoleSchema, ApiTokenConfigSchema, type TokenRole, type ApiTokenConfig } from './api-token.js';
export { CallbackSecretConfigSchema, MIN_CALLBACK_SECRET_CHARS, laneCallbackSecrets, type CallbackSecretConfig } from './callback-secret.js';
export { HistoryEntrySchema, type HistoryEntry } from './history.js';
export { CardRecordSchema, type CardRecord } from './card-record.js';
export {
  CONCURRENCY_KEY_MAX_LENGTH,
  CONCURRENCY_KEY_PATTERN,
  ConcurrencyKeySchema,
  MaxRunningPerKeySchema,
  KEY_LIMIT_WAITING,
  StateDetailSchema,
  type StateDetail,
} from './concurrency-key.js';
export { SupersedeModeSchema, DEFAULT_SUPERSEDE_MODE, SUPERSEDE_WAITING, SUPERSEDE_LATEST_TTL_MS, supersededReason, type SupersedeMode } from './supersede.js';
export {
  FaultPlanSchema,
  BreakerConfigSchema,
  RespawnConfigSchema,
  SlotScalingConfigSchema,
  RetentionConfigSchema,
  terminalRetentionMs,
  LaneConfigSchema,
  cardTimeoutMsOf,
  LanesConfigSchema,
  type FaultPlan,
  type FaultPlanInput,
  type BreakerConfig,
  type RespawnConfig,
  type SlotScalingConfig,
  type RetentionConfig,
  type LaneConfigInput,
  IsolationSettingSchema,
  STACK_ENV_PATTERN,
  type IsolationSetting,
  type LaneConfig,
  type LanesConfigInput,
  type LanesConfig,
} from './lane-config.js';
export {
  EnqueueResponseSchema,
  BulkEnqueueResponseSchema,
  UnblockBodySchema,
  RetryBodySchema,
  CardListQuerySchema,
  CardSummarySchema,
  CardPageSchema,
  type CardListQueryInput,
  type CardListQuery,
  type CardSummary,
  type CardPage,
  ErrorBodySchema,
  BreakerStateSchema,
  SlotStatusSchema,
  LaneStatusSchema,
  LaneOpenCardsSchema,
  LaneIsolationSchema,
  type LaneIsolation,
  type EnqueueResponse,
  type BulkEnqueueResponse,
  type ErrorBody,
  type BreakerStateName,
  type SlotStatus,
  type LaneStatus,
  type LaneOpenCards,
} from './api.js';
export { EventGapSchema, EventTypeSchema, LaneEventSchema, type EventGap, type EventType, type LaneEvent } from './events.js';
export { STREAM_ID_PATTERN, StreamIdSchema, compareStreamIds } from './stream-id.js';
export { toIssues, parseCard, parseLanesConfig } from './validation.js';
export * as defaults from './defaults.js';
export * from './errors/index.js';
export * as agentLimits from './agent-limits.js';
export { LanesEnvSchema, parseEnv, type LanesEnv } from './env.js';
export {
  DEFAULT_SENTINEL_PORT,
  parseRedisUrl,
  sentinelTargetFromEnv,
  formatRedisTarget,
  redactRedisUrl,
  type RedisTarget,
  type SentinelTarget,
  type SentinelEnv,
  type RedisHostPort,
  type RedisTargetResult,
} from './redis-target.js';
export { WorkerLivenessSchema, LivenessVerdictSchema, type WorkerLiveness, type LivenessVerdict } from './liveness.js';
export {
  classifyAddress,
  NON_GLOBAL_RANGES,
  parseIp,
  parseAllowRule,
  evaluateCallbackTarget,
  type AddressKind,
  type NonGlobalRange,
  type CallbackAllowRule,
  type CallbackTargetDecision,
} from './callback-target.js';
