/**
 * Local sandbox exec overhead and cancel latency, in one run:
 *
 *   npx tsx --conditions=@lanes/source bench/sandbox-exec.ts [--iterations N] [--cancels M] [--isolation auto|separate-uid|pid-namespace|process-group]
 *
 * (i)  `exec(['true'])` through the local provider vs a bare `child_process.spawn('true')` with the
 *      same stdio (target: mean ratio ≤ 1.3×);
 * (ii) abort → exec resolution for a tree that ignores SIGINT (target ≤ killGraceMs + 200 ms), and
 *      for information one that ignores SIGINT and SIGTERM (bounded by 2 × killGraceMs by design).
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import { LocalSandboxProvider, type IsolationMode, type SandboxHandle } from '@lanes/sandbox';
import { percentile } from './support/stats.js';

const { values } = parseArgs({
  options: {
    iterations: { type: 'string', default: '500' },
    warmup: { type: 'string', default: '50' },
    cancels: { type: 'string', default: '20' },
    isolation: { type: 'string', default: 'auto' },
  },
});
const ITERATIONS = Number(values.iterations);
const WARMUP = Number(values.warmup);
const CANCELS = Number(values.cancels);
const ISOLATION = values.isolation as 'auto' | IsolationMode;
const KILL_GRACE_MS = defaults.DEFAULT_KILL_GRACE_MS;
const EXEC_RATIO_TARGET = 1.3;
const CANCEL_TARGET_MS = KILL_GRACE_MS + 200;

interface Stats {
  mean: number;
  p50: number;
  p95: number;
}

function stats(samples: readonly number[]): Stats {
  return { mean: samples.reduce((s, x) => s + x, 0) / samples.length, p50: percentile(samples, 50), p95: percentile(samples, 95) };
}

/** The baseline: what the init itself does per command (argv spawn, piped stdout/stderr, wait for close). */
function bareSpawnTrue(): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn('true', [], { stdio: ['ignore', 'pipe', 'pipe'] });
    child.once('error', reject);
    child.once('close', () => resolve());
  });
}

async function timeIt(run: () => Promise<unknown>): Promise<number> {
  const start = performance.now();
  await run();
  return performance.now() - start;
}

async function execOverhead(handle: SandboxHandle): Promise<{ bare: Stats; local: Stats }> {
  const localTrue = async (): Promise<void> => {
    const result = await handle.exec(['true']);
    if (result.exitCode !== 0) throw new Error(`true exited ${result.exitCode}`);
  };
  for (let i = 0; i < WARMUP; i += 1) {
    await bareSpawnTrue();
    await localTrue();
  }
  const bare: number[] = [];
  const local: number[] = [];
  // Interleaved, so drift in machine load hits both sides alike.
  for (let i = 0; i < ITERATIONS; i += 1) {
    bare.push(await timeIt(bareSpawnTrue));
    local.push(await timeIt(localTrue));
  }
  return { bare: stats(bare), local: stats(local) };
}

async function cancelLatency(handle: SandboxHandle, script: string, runs: number): Promise<Stats> {
  const samples: number[] = [];
  for (let i = 0; i < runs; i += 1) {
    const abort = new AbortController();
    let abortedAt = 0;
    let output = '';
    const running = handle.exec(['bash', '-c', script], {
      signal: abort.signal,
      killGraceMs: KILL_GRACE_MS,
      onOutput: (_stream, chunk) => {
        output += chunk;
        if (abortedAt === 0 && output.includes('ready')) {
          abortedAt = performance.now();
          abort.abort();
        }
      },
    });
    const result = await running;
    if (!result.cancelled) throw new Error('cancel did not register');
    samples.push(performance.now() - abortedAt);
  }
  return stats(samples);
}

const ms = (x: number): string => `${x.toFixed(2)} ms`;

const baseDir = await mkdtemp(join(tmpdir(), 'lanes-bench-'));
const provider = new LocalSandboxProvider({ baseDir, isolation: ISOLATION });
try {
  const handle = await provider.create({ image: 'local', tags: { lane: 'bench', slot: '0', worker: 'bench' } });
  const { bare, local } = await execOverhead(handle);
  const sigintOnly = await cancelLatency(handle, 'trap "" INT; sleep 30 & sleep 30 & echo ready; wait', CANCELS);
  const stubborn = await cancelLatency(handle, 'trap "" INT TERM; sleep 30 & sleep 30 & echo ready; wait', Math.max(3, Math.ceil(CANCELS / 4)));
  await handle.terminate();

  const ratio = local.mean / bare.mean;
  console.log(`node ${process.version}, isolation ${provider.isolation}, ${ITERATIONS} iterations after ${WARMUP} warm-up, killGraceMs ${KILL_GRACE_MS}`);
  console.table({
    'spawn(true) baseline': { mean: ms(bare.mean), p50: ms(bare.p50), p95: ms(bare.p95), target: '' },
    'local exec(true)': { mean: ms(local.mean), p50: ms(local.p50), p95: ms(local.p95), target: '' },
    'ratio local/baseline': {
      mean: `${ratio.toFixed(2)}×`,
      p50: `${(local.p50 / bare.p50).toFixed(2)}×`,
      p95: `${(local.p95 / bare.p95).toFixed(2)}×`,
      target: `≤ ${EXEC_RATIO_TARGET}× ${ratio <= EXEC_RATIO_TARGET ? 'met' : 'MISSED'}`,
    },
    [`cancel, SIGINT ignored (n=${CANCELS})`]: {
      mean: ms(sigintOnly.mean),
      p50: ms(sigintOnly.p50),
      p95: ms(sigintOnly.p95),
      target: `≤ ${CANCEL_TARGET_MS} ms ${sigintOnly.p95 <= CANCEL_TARGET_MS ? 'met' : 'MISSED'}`,
    },
    'cancel, SIGINT+SIGTERM ignored': {
      mean: ms(stubborn.mean),
      p50: ms(stubborn.p50),
      p95: ms(stubborn.p95),
      target: `(2 graces by design: ${2 * KILL_GRACE_MS} ms + kill)`,
    },
  });
} finally {
  for (const ref of await provider.list()) await provider.terminateById(ref.id);
  await provider.close();
  await rm(baseDir, { recursive: true, force: true });
}
