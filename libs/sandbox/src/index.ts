// @lanes/sandbox public surface. One export line per concept so parallel additions do not conflict.
export type { OutputStream, ExecOptions, ExecResult, ReadFileOptions, ResetDirsOptions, SandboxHandle, CreateOptions, SandboxRef, SandboxProvider } from './provider.js';
export { resetTargets, RESET_DIRS_SCRIPT } from './reset-dirs.js';
export { ExecQueue, type RawExec, type ExecQueueDeps } from './exec-queue.js';
export { CANCELLED_EXIT_CODE, cancelledBeforeStart, exitCodeOf, signalExitCode } from './exec-result.js';
export { withDeadline, pollUntil, DeadlineExceeded } from './deadline.js';
export { bestEffort, type CleanupErrorSink } from './best-effort.js';
export {
  LocalSandboxProvider,
  createLocalProvider,
  newLocalSandboxId,
  DEFAULT_LOCAL_BASE_DIR,
  LOCAL_INIT_PATH,
  type LocalProviderOptions,
  type LocalProviderDeps,
} from './local/local-provider.js';
export { LocalSandbox, type LocalSandboxState } from './local/local-sandbox.js';
export { detectIsolation, isolatesAgents, type IsolationMode } from './local/isolation.js';
export { resolveLaneIsolation, firstUnreadablePath, type IsolationCapabilities } from './local/lane-isolation.js';
export { probeSeparateUid, type SeparateUidProbe } from './local/separate-uid.js';
export { sandboxMembers, SANDBOX_ID_ENV, EXEC_ID_ENV } from './sandbox-reaper.js';
export { isAlive } from './proc.js';
export {
  syncFiles,
  unpackArgv,
  DEFAULT_SYNC_MAX_ARG_BYTES,
  DEFAULT_SYNC_MAX_FILES_PER_BATCH,
  DEFAULT_SYNC_MAX_BATCH_BYTES,
  type SyncTarget,
  type SyncFilesOptions,
  type SyncProgress,
  type SyncSummary,
} from './file-sync.js';
export { buildTar, type TarEntry } from './tar-writer.js';
export { toLanesError as toModalLanesError, isGone as isModalSandboxGone, MODAL_PROVIDER_NAME, type ModalErrorScope } from './modal/modal-errors.js';
export {
  createModalClient,
  MODAL_MAX_THROTTLE_WAIT_SECS,
  type ModalClientLike,
  type ModalControlPlaneLike,
  type ModalClientFactoryOptions,
  type ModalSandboxLike,
  type ModalProcessLike,
  type ModalExecParamsLike,
  type ModalSandboxCreateParamsLike,
  type ModalAppLike,
  type ModalImageLike,
  type ModalSecretLike,
  type ModalVolumeLike,
  type ModalFilesystemLike,
  type ModalReadStreamLike,
} from './modal/modal-client.js';
export {
  ModalProvider,
  createModalProvider,
  DEFAULT_MODAL_APP_NAME,
  DEFAULT_MODAL_WORKDIR,
  DEFAULT_MODAL_LIVENESS_POLL_INTERVAL_MS,
  DEFAULT_MODAL_BACKSTOP_MARGIN_MS,
  DEFAULT_MODAL_OUTPUT_DRAIN_MS,
  DEFAULT_MODAL_MAX_OUTPUT_CHARS,
  DEFAULT_MODAL_FILE_OP_TIMEOUT_MS,
  DEFAULT_MODAL_CALL_TIMEOUT_MS,
  type ModalProviderOptions,
  type CreateModalProviderOptions,
} from './modal/modal-provider.js';
export { ModalSandboxHandle } from './modal/modal-sandbox-handle.js';
export { FaultyProvider, createFaultyProvider, FAULTY_KILLED_EXIT_CODE, CARD_ID_ENV as FAULTY_CARD_ID_ENV, type FaultStats } from './faulty-provider.js';
export { createProviderRegistry, type ProviderRegistry, type ProviderRegistryOptions } from './provider-registry.js';
export { agentBaseEnv } from './agent-env.js';
