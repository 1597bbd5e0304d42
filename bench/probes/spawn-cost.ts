/**
 * What starting a process costs on this host: a Node process's `spawn('true')`, as a local
 * sandbox's init makes for each command and the throughput bench's bare worker for each job, at
 * three sizes of the spawning process; beside it, a shell starting `/bin/true`. Node forks, so
 * the parent pays for its own memory on every spawn; this is the CPU that the throughput run's
 * four inits and its baseline burn beside the stack (docs/results.md, "Known limits").
 *
 *   npx tsx bench/probes/spawn-cost.ts [--spawns N]   # default 200 per row
 *
 * Each Node row runs in a fresh plain `node` of its own, holding MiB of touched buffers: wall
 * time per spawn (to `close`, stdout and stderr piped) and the parent's CPU per spawn. The shell
 * row is `sh -c` looping over `/bin/true`, timed whole.
 */
import { execFileSync } from 'node:child_process';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { spawns: { type: 'string', default: '200' } } });
const SPAWNS = Number(values.spawns);
const BALLAST_MB = [0, 100, 300];

interface Row {
  label: string;
  rssMb?: number;
  wallMs: number;
  parentCpuMs?: number;
}

/**
 * Run by a plain `node` (no tsx loaded, so the smallest row is the size of an init): spawns `true`
 * one after another while holding argv[1] MiB of touched memory, and prints its row as JSON.
 */
const CHILD_SOURCE = `
import { spawn } from 'node:child_process';
const [ballastMb, spawns] = process.argv.slice(1).map(Number);
const ballast = Array.from({ length: ballastMb }, () => Buffer.alloc(1 << 20, 1));
const cpu0 = process.cpuUsage();
const t0 = performance.now();
for (let i = 0; i < spawns; i++) await new Promise((resolve) => spawn('true', [], { stdio: ['ignore', 'pipe', 'pipe'] }).once('close', resolve));
const wallMs = (performance.now() - t0) / spawns;
const cpu = process.cpuUsage(cpu0);
const rssMb = Math.round(process.memoryUsage().rss / 2 ** 20);
process.stdout.write(JSON.stringify({ rssMb, wallMs, parentCpuMs: (cpu.user + cpu.system) / 1000 / spawns, held: ballast.length }));
`;

const rows: Row[] = [];
for (const mb of BALLAST_MB) {
  const out = execFileSync(process.execPath, ['--input-type=module', '-e', CHILD_SOURCE, String(mb), String(SPAWNS)], { encoding: 'utf8' });
  const r = JSON.parse(out) as Required<Omit<Row, 'label'>>;
  rows.push({ label: `node \`spawn('true')\`, the spawning process at ${r.rssMb} MiB resident`, rssMb: r.rssMb, wallMs: r.wallMs, parentCpuMs: r.parentCpuMs });
}
const t0 = performance.now();
execFileSync('sh', ['-c', 'i=0; while [ "$i" -lt "$1" ]; do /bin/true; i=$((i+1)); done', 'sh', String(SPAWNS)]);
rows.push({ label: '`sh` running `/bin/true` in a loop', wallMs: (performance.now() - t0) / SPAWNS });
const base = rows[0]!;
console.log(`\nprocess start cost (${SPAWNS} of each, one after another)\n`);
console.log('| what | wall per process | spawning process CPU per process | wall ÷ the smallest node |');
console.log('|---|---|---|---|');
for (const r of rows) {
  console.log(`| ${r.label} | ${r.wallMs.toFixed(2)} ms | ${r.parentCpuMs === undefined ? '' : `${r.parentCpuMs.toFixed(2)} ms`} | ${(r.wallMs / base.wallMs).toFixed(2)}× |`);
}
const round = (n: number | undefined) => (n === undefined ? null : Number(n.toFixed(2)));
console.log(`BENCH_JSON ${JSON.stringify({ bench: 'spawn-cost', spawns: SPAWNS, rows: rows.map((r) => ({ ...r, wallMs: round(r.wallMs), parentCpuMs: round(r.parentCpuMs) })) })}`);
