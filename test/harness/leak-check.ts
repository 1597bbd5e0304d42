import { TEST_RUN_ENV, newTestRunId, reapRun } from './test-run.js';

/**
 * Vitest global setup: every suite must end what it starts. The run gets an id in the environment
 * (inherited by every fork, redis-server, worker and sandbox of this run); at teardown, processes
 * carrying it that are still alive are killed and fail the run. Processes of other runs and of a
 * `lanes up` running beside the tests carry no such id and are never touched.
 */
export default function setup(): () => void {
  const runId = newTestRunId();
  process.env[TEST_RUN_ENV] = runId;
  return () => {
    const leaked = reapRun(runId);
    if (leaked.length === 0) return;
    // Vitest reports a throwing teardown but still exits 0, so set the exit code as well.
    process.exitCode = 1;
    const listed = leaked.map((p) => `${p.pid} (${p.kind})`).join(' ');
    throw new Error(`test run leaked ${leaked.length} process(es): ${listed} (killed)`);
  };
}
