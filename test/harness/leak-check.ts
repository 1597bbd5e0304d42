import { readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';

/**
 * Pids this test run may have started: sandbox processes (they carry LANES_SANDBOX_ID) whose workdir
 * is under the temp dir, and redis-servers the harness started (their cwd is a lanes-redis-* temp dir).
 */
function testProcessPids(): Set<number> {
  const pids = new Set<number>();
  const tmp = tmpdir();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readlinkSync(`/proc/${name}/cwd`).startsWith(`${tmp}/lanes-redis-`)) pids.add(Number(name));
    } catch {
      // gone, or not ours to read
    }
    let env: string;
    try {
      env = readFileSync(`/proc/${name}/environ`, 'latin1');
    } catch {
      continue;
    }
    const vars = env.split('\0');
    if (!vars.some((v) => v.startsWith('LANES_SANDBOX_ID='))) continue;
    const workdir = vars.find((v) => v.startsWith('LANES_SANDBOX_WORKDIR='))?.slice('LANES_SANDBOX_WORKDIR='.length);
    if (workdir?.startsWith(tmp)) pids.add(Number(name));
  }
  return pids;
}

/**
 * Vitest global setup: every suite must end the sandboxes it starts. At teardown, sandbox processes
 * that appeared during the run and are still alive are killed (they are ours) and fail the run.
 */
export default function setup(): () => void {
  const before = testProcessPids();
  return () => {
    const leaked = [...testProcessPids()].filter((pid) => !before.has(pid));
    if (leaked.length === 0) return;
    for (const pid of leaked) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // already gone
      }
    }
    // Vitest reports a throwing teardown but still exits 0, so set the exit code as well.
    process.exitCode = 1;
    throw new Error(`test run leaked ${leaked.length} sandbox or redis-server process(es): ${leaked.join(' ')} (killed)`);
  };
}
