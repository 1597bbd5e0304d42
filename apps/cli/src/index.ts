export { main } from './main.js';
export { startStack, type Stack, type StackOptions } from './stack.js';
export { loadConfig, demoConfig, type LoadedConfig } from './config-load.js';
export { resolveRedis, pingRedis, RedisUnavailableError, type ResolvedRedis, type ResolveRedisOptions } from './redis-resolve.js';
export { createLogger, REDACT_PATHS } from './logger.js';
export { table } from './table.js';
export { DEMO_AGENT, PROJECT_DIR } from './paths.js';
export { checkProviderCredentials } from './provider-check.js';
export { freePort } from './free-port.js';
