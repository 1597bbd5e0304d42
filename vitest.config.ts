import { defineConfig } from 'vitest/config';

// Tests run straight from src/ through the "@lanes/source" export condition.
const conditions = ['@lanes/source', 'import', 'node', 'default'];

export default defineConfig({
  resolve: { conditions },
  ssr: { resolve: { conditions, externalConditions: conditions } },
  test: {
    include: ['libs/*/test/**/*.test.ts', 'apps/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    globalSetup: ['test/harness/leak-check.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    fileParallelism: true,
    maxWorkers: 2,
  },
});
