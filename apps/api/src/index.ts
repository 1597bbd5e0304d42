export { createApiServer, BODY_LIMIT_BYTES, type ApiOptions, type ApiServer } from './server.js';
export { createAuthHook, parseTokens } from './auth.js';
export { BOARD_PATH } from './board.js';
export { ApiError } from './api-error.js';
export type { EventStreamOptions, EventStreamStats } from './routes/events.js';
