/**
 * A worker container's start: the exec of `lanes worker` → its `/readyz` answering 200 (started,
 * its first heartbeat in Redis: it takes cards), as a pod that KEDA adds for a backlog starts.
 * Beside it, in the same run: a bare `node` starting an HTTP server that answers the same probe,
 * the floor of any Node service's start.
 *
 *   npx tsx --conditions=@lanes/source bench/worker-boot.ts [--rounds R] [--other DIR]
 *
 * The worker runs as the image runs it (`node apps/cli/bin/lanes.js worker`, from TypeScript
 * through tsx) on this process's Node (`npx -p node@26 node --import tsx …` for the images'
 * runtime), with one `minSlots: 0` local lane (no sandbox at boot) and a redis-server of its own.
 * Two states of tsx's transform cache, which lives under TMPDIR: cold, an empty TMPDIR, as a new
 * container's first start; warm, one TMPDIR kept across the rounds and warmed by an untimed start,
 * as a restart. `--other DIR` adds the same two from another checkout (a worktree of an earlier
 * commit, with its own node_modules), so a change to the start is measured before and after in one
 * run. The sides' order rotates from round to round.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_DIR } from '@lanes/cli';
import { freePort, startRedis } from '../test/harness/index.js';
import { median, percentile } from './support/stats.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '7' }, other: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
/** A start that has not answered by then has found a fault, not a figure. */
const START_DEADLINE_MS = 60_000;
/** How often the probe is tried while a process starts. */
const PROBE_INTERVAL_MS = 5;
/** The floor: a Node process that answers any path with 200 as soon as it listens. */
const BARE_SERVER = "require('node:http').createServer((req, res) => res.end('ok')).listen(Number(process.env.PORT), '127.0.0.1')";

interface Side {
  name: string;
  /** Started once, untimed, before the rounds: its tsx cache is kept across them. */
  warm?: boolean;
  /** argv after node, and the environment, for a start that answers on `port`. */
  command: (port: number) => { args: string[]; env: NodeJS.ProcessEnv };
}

const work = mkdtempSync(join(tmpdir(), 'lanes-bench-boot-'));
const redis = await startRedis();
const config = join(work, 'lanes.json');
writeFileSync(config, JSON.stringify({ lanes: [{ name: 'boot', provider: 'local', slots: 1, minSlots: 0, maxSlots: 1, agent: ['true'] }] }));

/** `lanes worker` of the checkout at `root`, its tsx cache under `tmp()`. */
const workerSide = (name: string, root: string, tmp: () => string, warm = false): Side => ({
  name,
  warm,
  command: (port) => ({
    args: [join(root, 'apps/cli/bin/lanes.js'), 'worker'],
    env: {
      PATH: process.env.PATH,
      HOME: process.env.HOME,
      TMPDIR: tmp(),
      REDIS_URL: redis.url,
      LANES_CONFIG: config,
      LANES_HEALTH_PORT: String(port),
      LANES_SANDBOX_DIR: join(work, 'sandboxes'),
      LANES_LOG_LEVEL: 'warn',
    },
  }),
});
const newTmp = () => mkdtempSync(join(work, 'tmp-'));
const checkouts: Array<[string, string]> = [['this checkout', PROJECT_DIR], ...(values.other ? [[values.other, values.other] as [string, string]] : [])];
const sides: Side[] = [{ name: 'bare node HTTP server', command: (port) => ({ args: ['-e', BARE_SERVER], env: { PATH: process.env.PATH, PORT: String(port) } }) }];
for (const [label, root] of checkouts) {
  const warmTmp = newTmp();
  sides.push(
    workerSide(`lanes worker, ${label}, tsx cache cold`, root, newTmp),
    workerSide(`lanes worker, ${label}, tsx cache warm`, root, () => warmTmp, true),
  );
}

/** ms from the exec until the process answers GET /readyz with 200; the process is then ended. */
async function start(side: Side): Promise<number> {
  const port = await freePort();
  const { args, env } = side.command(port);
  const started = performance.now();
  const child = spawn(process.execPath, args, { cwd: work, env, stdio: ['ignore', 'ignore', 'inherit'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  try {
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
        (res) => res.status === 200,
        () => false,
      );
      if (ok) return performance.now() - started;
      if (child.exitCode !== null) throw new Error(`${side.name}: exited ${child.exitCode} before it answered`);
      if (performance.now() - started > START_DEADLINE_MS) throw new Error(`${side.name}: no answer in ${START_DEADLINE_MS} ms`);
      await new Promise((resolve) => setTimeout(resolve, PROBE_INTERVAL_MS));
    }
  } finally {
    child.kill('SIGTERM');
    await exited;
  }
}

try {
  // Untimed: fills each warm cache (and the box's file cache for both).
  for (const side of sides) if (side.warm) await start(side);
  const ms = new Map<string, number[]>(sides.map((s) => [s.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    const order = sides.map((_, i) => sides[(i + round) % sides.length]!);
    for (const side of order) ms.get(side.name)!.push(await start(side));
    console.error(`round ${round + 1}/${ROUNDS}: ${order.map((s) => `${s.name} ${ms.get(s.name)!.at(-1)!.toFixed(0)} ms`).join(', ')}`);
  }
  const bare = median(ms.get(sides[0]!.name)!);
  console.log(
    `\nworker start (${process.version}; exec → /readyz 200; medians of ${ROUNDS} rounds; load average ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')})\n`,
  );
  console.log('| start | median | p95 | × bare |');
  console.log('|---|---|---|---|');
  for (const side of sides) {
    const xs = ms.get(side.name)!;
    console.log(`| ${side.name} | ${median(xs).toFixed(0)} ms | ${percentile(xs, 95).toFixed(0)} ms | ${(median(xs) / bare).toFixed(2)}× |`);
  }
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'worker-boot', node: process.version, rounds: ROUNDS, ms: Object.fromEntries(ms), loadAverage: loadavg() })}`);
} finally {
  await redis.stop();
  rmSync(work, { recursive: true, force: true });
}
