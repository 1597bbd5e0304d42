export { createApiServer, BODY_LIMIT_BYTES, DEFAULT_API_LIMITS, type ApiOptions, type ApiServer, type ApiLimits } from './server.js';
export { createAuthHook, createEdgeHook, parseTokens } from './auth.js';
export { inScope, hasRole, OPEN_PRINCIPAL, type Principal } from './edge/principal.js';
export { compileApiTokens, identify, type ApiToken } from './edge/api-tokens.js';
export { evaluateAccess, type AccessDecision } from './edge/access.js';
export { evaluateEdge, evaluateBind, isLoopbackHost, type EdgeRequest, type EdgeDecision, type BindDecision } from './edge/browser-edge.js';
export { BOARD_PATH } from './board.js';
export { ApiError } from './api-error.js';
export type { EventStreamOptions, EventStreamStats } from './routes/events.js';
