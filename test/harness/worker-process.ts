import { spawn, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PROJECT_DIR } from '@lanes/cli';
import type { LaneConfigInput } from '@lanes/contracts';

export interface WorkerProcess {
  child: ChildProcess;
  /** SIGKILL, as a crash would; resolves once it has exited. */
  crash(): Promise<void>;
}

/**
 * A `lanes worker` in its own process. It is spawned as `node bin/lanes.js` (no npx in between),
 * so the pid we hold is the worker itself.
 */
export function spawnWorker(opts: { dir: string; redisUrl: string; sandboxDir: string; lanes: LaneConfigInput[]; env?: Record<string, string> }): WorkerProcess {
  const config = join(opts.dir, `lanes-${Date.now()}-${Math.random().toString(36).slice(2)}.json`);
  writeFileSync(config, JSON.stringify({ lanes: opts.lanes }));
  const child = spawn(process.execPath, [join(PROJECT_DIR, 'apps/cli/bin/lanes.js'), 'worker', '--config', config], {
    env: { ...process.env, REDIS_URL: opts.redisUrl, LANES_SANDBOX_DIR: opts.sandboxDir, LANES_LOG_LEVEL: 'silent', ...opts.env },
    stdio: 'ignore',
  });
  return {
    child,
    async crash() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((r) => child.once('exit', r));
      child.kill('SIGKILL');
      await exited;
    },
  };
}
