export { startRedis, type TestRedis } from './redis-server.js';
export { waitFor } from './wait-for.js';
export { freePort } from '@lanes/cli';
export { apiClient, type ApiClient } from './api.js';
export { startTestStack, testLog, type TestStack } from './stack.js';
export { spawnWorker, type WorkerProcess } from './worker-process.js';
export { useRedis, type RedisFixture } from './redis-fixture.js';
export { agentLedger, type LedgerLine } from './agent-ledger.js';
export { startSentinelGroup, type TestSentinelGroup, type SentinelGroupOptions } from './redis-sentinel.js';
