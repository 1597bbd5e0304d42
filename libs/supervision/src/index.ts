export type { CommandOutcome, ProviderErrorKind } from './command-outcome.js';
export { SUSPECT_EXIT_CODES, LIFETIME_EXIT_CODE, SIGNAL_EXIT_BASE, isDeathExitCode, suspectOf, type Suspicion, type SuspectReason } from './suspect.js';
export {
  DEFAULT_PROBE_CONFIG,
  planProbe,
  canaryCommand,
  readCanary,
  planSecondCanary,
  SECOND_CANARY_DEADLINE_FACTOR,
  type SecondCanaryPlan,
  type ProbeFinding,
  type ProbeConfig,
  type ProbePlan,
  type CanaryReading,
} from './probe.js';
export { classify, type Classification } from './classify.js';
export {
  INITIAL_BREAKER,
  DEFAULT_BREAKER_CONFIG,
  breakerOnFailure,
  breakerOnCanaryPassed,
  breakerOnTick,
  evaluateCreate,
  type BreakerSnapshot,
  type BreakerPolicyConfig,
  type BreakerTransition,
  type BreakerStep,
  type CreateDecision,
} from './breaker.js';
export {
  DEFAULT_RESPAWN_CONFIG,
  respawnBackoffMs,
  evaluateRespawn,
  recordDeath,
  type DeathHistory,
  type RespawnDecision,
} from './respawn.js';
export { evaluateInfraRetry, type InfraRetryDecision } from './infra-budget.js';
export { selectRedrive, type BlockedCard, type RedriveTrigger, type RedriveDecision } from './redrive.js';
export { desiredSlots, desiredWorkers, type LaneLoad, type SlotBounds, type SlotsDecision } from './desired-slots.js';
export { evaluateScale, type ScaleSnapshot, type ScaleDepth, type ScaleDecision } from './scale-demand.js';
export {
  attributeOwners,
  evaluateOrphans,
  evaluateWorkerRecords,
  type SandboxOwnerRecord,
  type ListedSandbox,
  type OrphanSnapshot,
  type OrphanOptions,
  type OrphanDecision,
  type WorkerRecordDecision,
} from './orphans.js';
export {
  DEFAULT_LIVENESS_CONFIG,
  INITIAL_LIVENESS_STATE,
  LivenessTracker,
  evaluateLiveness,
  livenessOf,
  trackBeats,
  verdictsByWorker,
  type BeatObservation,
  type LivenessConfig,
  type LivenessState,
  type LivenessStep,
  type TrackedWorker,
} from './liveness.js';
export {
  evaluateKeyAdmission,
  hasKeyRoom,
  DEFAULT_KEY_PARK_BACKSTOP_MS,
  type KeyAdmissionConfig,
  type KeyAdmissionDecision,
  type KeyAdmissionSnapshot,
} from './key-admission.js';
export { evaluateSupersede, type SupersedeDecision } from './supersede.js';
export { evaluateRedriveGate, type RedriveGateSnapshot, type RedriveGateDecision } from './redrive-gate.js';
export { VERDICT_EVENT_TYPES, slotVerdictsOf, type VerdictEvent } from './slot-verdicts.js';
export {
  DEFAULT_FLEET_MIN_OUTAGE_SLOTS,
  evaluateFleet,
  type SlotVerdict,
  type FleetView,
  type FleetConfig,
  type FleetStatus,
} from './fleet.js';
export { isInsideWindow, pruneWindow } from './window.js';
export { evaluateIdleProbe, type IdleProbeFinding, type IdleProbeDecision } from './idle-probe.js';
export { evaluateIdleCanary, DEFAULT_MAX_FAILED_CANARIES, DEFAULT_IDLE_CANARY_CONFIG, type IdleCanaryConfig, type IdleCanaryDecision } from './idle-canary.js';
export {
  evaluateSlotScaling,
  workerSlotRange,
  type SlotView,
  type SlotScalingSnapshot,
  type SlotScalingPolicyConfig,
  type SlotScalingDecision,
} from './slot-scaling.js';
export { evaluateSandboxRenewal, type SandboxRenewalConfig, type SandboxRenewalDecision, type SandboxRenewalSnapshot } from './sandbox-renewal.js';
