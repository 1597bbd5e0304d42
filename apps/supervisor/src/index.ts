export { createSupervisorApp, DEFAULT_SWEEP_INTERVAL_MS, FLEET_WINDOW_MS, type SupervisorApp, type SupervisorOptions } from './supervisor-app.js';
export { CallbackDispatcher, CALLBACK_GROUP, CALLBACK_TIMEOUT_MS, signBody } from './callbacks.js';
export { carryOldCallbacks, OLD_CALLBACK_STREAM, type CarriedCallbacks } from './callback-upgrade.js';
export { resolveCallbackTarget, systemLookup, type CallbackLookup, type CallbackTarget } from './callback-target.js';
export { evaluateCallback, isNotified, DEFAULT_CALLBACK_RETRY, type CallbackRetryConfig, type CallbackDecision } from './callback-policy.js';
