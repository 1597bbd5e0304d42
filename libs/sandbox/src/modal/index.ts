// @lanes/sandbox/modal: the Modal provider, its client, errors and defaults.
export { toLanesError as toModalLanesError, isGone as isModalSandboxGone, MODAL_PROVIDER_NAME, type ModalErrorScope } from './modal-errors.js';
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
} from './modal-client.js';
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
} from './modal-provider.js';
export { ModalSandboxHandle } from './modal-sandbox-handle.js';
