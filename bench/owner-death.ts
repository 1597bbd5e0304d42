/**
 * Owner death → sandbox gone: how long a local sandbox, and a command in it that escaped into its own
 * session, outlive a worker that dies by SIGKILL (DESIGN rule 6: within 1 s, through the lifeline).
 *
 *   npx tsx --conditions=@lanes/source bench/owner-death.ts [--rounds N] [--isolation pid-namespace|process-group]
 *
 * Each round starts a real creator process (the worker's part: a LocalSandboxProvider that creates
 * one sandbox and starts `setsid sleep 30 & sleep 30` in it), SIGKILLs it, and times until no
 * process carrying the sandbox's id is left. Baseline, measured in the same run: kill → the
 * creator's own exit event, the floor of anything that reacts to its death.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_DIR } from '@lanes/cli';
import { detectIsolation, sandboxMembers, type IsolationMode } from '@lanes/sandbox';
import { percentile as pct } from './support/stats.js';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '20' }, isolation: { type: 'string' } } });
const ROUNDS = Number(values.rounds);
const ISOLATION = (values.isolation ?? detectIsolation()) as IsolationMode;
/** DESIGN rule 6. */
const TARGET_MS = 1_000;
/** How often the sandbox's processes are looked for after the kill. */
const SCAN_INTERVAL_MS = 5;
const CREATE_AND_WAIT = join(PROJECT_DIR, 'libs/sandbox/test/support/create-and-wait.ts');

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function round(baseDir: string, n: number): Promise<{ exitMs: number; goneMs: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', '--conditions=@lanes/source', CREATE_AND_WAIT, baseDir, ISOLATION, `bench-${n}`, `bench-marker-${n}`], {
    cwd: PROJECT_DIR,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const { id } = await new Promise<{ id: string }>((resolve, reject) => {
    let out = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      out += chunk.toString();
      if (out.includes('\n')) resolve(JSON.parse(out.split('\n')[0]!) as { id: string });
    });
    child.once('exit', (code) => reject(new Error(`creator exited early with ${code}`)));
  });
  const exited = new Promise<number>((resolve) => child.once('exit', () => resolve(performance.now())));
  const killedAt = performance.now();
  child.kill('SIGKILL');
  let goneAt = 0;
  for (;;) {
    if (sandboxMembers(id).length === 0) {
      goneAt = performance.now();
      break;
    }
    if (performance.now() - killedAt > 30_000) throw new Error(`sandbox ${id} outlived its creator by 30 s`);
    await sleep(SCAN_INTERVAL_MS);
  }
  return { exitMs: (await exited) - killedAt, goneMs: goneAt - killedAt };
}

const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-owner-death-'));
try {
  const exits: number[] = [];
  const gones: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const r = await round(dir, i);
    exits.push(r.exitMs);
    gones.push(r.goneMs);
    process.stderr.write(`round ${i + 1}/${ROUNDS}: creator exit ${r.exitMs.toFixed(1)} ms, sandbox gone ${r.goneMs.toFixed(1)} ms\n`);
  }
  const rows = [
    ['creator SIGKILL → its exit event (baseline)', pct(exits, 50), pct(exits, 95)],
    ['creator SIGKILL → no process of its sandbox left', pct(gones, 50), pct(gones, 95)],
  ] as const;
  console.log(`\n### Owner death (${ROUNDS} rounds, isolation ${ISOLATION})\n`);
  console.log('| measurement | p50 | p95 |\n|---|---|---|');
  for (const [name, p50, p95] of rows) console.log(`| ${name} | ${p50.toFixed(0)} ms | ${p95.toFixed(0)} ms |`);
  console.log(
    `\nratio (gone p95 / baseline p95): ${(pct(gones, 95) / Math.max(1, pct(exits, 95))).toFixed(1)}×; target p95 ≤ ${TARGET_MS} ms: ${pct(gones, 95) <= TARGET_MS ? 'met' : 'MISSED'}`,
  );
  console.log(
    `BENCH_JSON ${JSON.stringify({ rounds: ROUNDS, isolation: ISOLATION, exitP50Ms: pct(exits, 50), exitP95Ms: pct(exits, 95), goneP50Ms: pct(gones, 50), goneP95Ms: pct(gones, 95) })}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
