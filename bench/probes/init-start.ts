/**
 * How long a local sandbox's init takes to start on each Node runtime: spawn `node local-init.mjs`
 * (no namespace, no spawner) and time until it answers a ping, one init at a time, the runtimes
 * alternated. Both sides of burst.ts start these inits, so their start is in the provider's time
 * and lanes' alike; this shows what a runtime adds to every create.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/init-start.ts [--node PATH]... [--n N]   # default: this process's node
 */
import { execFileSync, spawn } from 'node:child_process';
import { parseArgs } from 'node:util';
import { LOCAL_INIT_PATH } from '../../libs/sandbox/src/local/local-provider.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { node: { type: 'string', multiple: true }, n: { type: 'string', default: '15' } } });
const runtimes = values.node?.length ? values.node : [process.execPath];
const N = Number(values.n);

/** ms from the spawn until the init's pong. */
async function startOnce(node: string): Promise<number> {
  const t0 = performance.now();
  const init = spawn(node, [LOCAL_INIT_PATH], { stdio: ['pipe', 'pipe', 'inherit'], env: { PATH: process.env.PATH ?? '', LANES_SANDBOX_ID: 'probe' } });
  const exited = new Promise((resolve) => {
    init.once('exit', resolve);
    init.once('error', resolve); // a node that could not start has no exit to wait for
  });
  init.stdin.on('error', () => undefined); // an init gone before the ping: its exit says so
  try {
    await new Promise<void>((resolve, reject) => {
      init.once('error', reject);
      // An init that dies before it answers would otherwise leave the probe waiting for good.
      init.once('exit', (code, signal) => reject(new Error(`${node}: the init exited (${code ?? signal}) before its pong`)));
      init.stdout.once('data', () => resolve());
      init.stdin.write(`${JSON.stringify({ op: 'ping', id: 1 })}\n`);
    });
    return performance.now() - t0;
  } finally {
    init.kill('SIGKILL');
    await exited;
  }
}

const times = new Map<string, number[]>(runtimes.map((r) => [r, []]));
for (let i = 0; i < N; i++) for (const node of runtimes) times.get(node)!.push(await startOnce(node));
for (const [node, ms] of times) {
  const version = execFileSync(node, ['--version'], { encoding: 'utf8' }).trim();
  console.log(`${version} (${node}): the init answers its first ping in ${median(ms).toFixed(1)} ms (median of ${N}; ${Math.min(...ms).toFixed(1)}–${Math.max(...ms).toFixed(1)})`);
}
