export { createSupervisorApp, DEFAULT_SWEEP_INTERVAL_MS, FLEET_WINDOW_MS, type SupervisorApp, type SupervisorOptions } from './supervisor-app.js';
export {
  CallbackDispatcher,
  CALLBACK_GROUP,
  CALLBACK_MAX_HELD,
  CALLBACK_TIMEOUT_MS,
  DELIVERY_HEADER,
  type CallbackDeps,
} from './callbacks.js';
export { SIGNATURE_HEADER, signBody, signatureHeader } from './callback-signature.js';
export { carryOldCallbacks, OLD_CALLBACK_STREAM, type CarriedCallbacks } from './callback-upgrade.js';
export { resolveCallbackTarget, systemLookup, type CallbackLookup, type CallbackTarget } from './callback-target.js';
export {
  evaluateCallback,
  isNotified,
  selectDeliveries,
  DEFAULT_CALLBACK_RETRY,
  DEFAULT_CALLBACK_CONCURRENCY,
  type CallbackRetryConfig,
  type CallbackConcurrencyConfig,
  type CallbackDecision,
  type DeliverySlot,
  type DeliverySnapshot,
} from './callback-policy.js';
