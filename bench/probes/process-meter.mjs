/**
 * A preload for any bench or probe: every Node process of the run (the stack forked by
 * stack-client.ts inherits it through NODE_OPTIONS) prints, as it exits, one `PROCESS_METER` line:
 * each child it spawned (the command, when, the wall and this process's CPU inside `spawn()`: the
 * fork, whose page-table copy grows with the spawner's memory) and each GC pause (kind, when,
 * how long), times in ms since the process started. It answers two questions about a burst: what
 * the stack's forks of the sandbox inits cost it, and whether a collection fell inside the burst.
 *
 *   NODE_OPTIONS="--import $PWD/bench/probes/process-meter.mjs" npx tsx --conditions=@lanes/source bench/probes/burst-cpu.ts --rounds 2
 *
 * Plain ESM, not TypeScript: NODE_OPTIONS loads it before tsx is registered.
 */
import cp from 'node:child_process';
import { writeSync } from 'node:fs';
import { basename } from 'node:path';
import { PerformanceObserver } from 'node:perf_hooks';

const spawns = [];
const pauses = [];
const spawnChild = cp.ChildProcess.prototype.spawn;
cp.ChildProcess.prototype.spawn = function meteredSpawn(options) {
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  try {
    return spawnChild.call(this, options);
  } finally {
    const cpu = process.cpuUsage(cpuBefore);
    spawns.push({ file: basename(String(options?.file ?? '?')), at: startedAt, wallMs: performance.now() - startedAt, cpuMs: (cpu.user + cpu.system) / 1000 });
  }
};
new PerformanceObserver((list) => {
  for (const e of list.getEntries()) pauses.push({ kind: e.detail?.kind, at: e.startTime, ms: e.duration });
}).observe({ entryTypes: ['gc'] });

const total = (rows, key) => rows.reduce((sum, r) => sum + r[key], 0).toFixed(1);
process.on('exit', () => {
  const spawned = spawns.map((s) => `${s.file}@${s.at.toFixed(0)}:${s.wallMs.toFixed(1)}/${s.cpuMs.toFixed(1)}`).join(' ');
  const collected = pauses.map((p) => `${p.kind}@${p.at.toFixed(0)}:${p.ms.toFixed(1)}`).join(' ');
  const rssMiB = (process.memoryUsage.rss() / 1048576).toFixed(0);
  writeSync(
    2,
    `PROCESS_METER pid ${process.pid} rss ${rssMiB} MiB | spawns ${spawns.length}, wall ${total(spawns, 'wallMs')} ms, cpu ${total(spawns, 'cpuMs')} ms: ${spawned} | gc ${pauses.length}, ${total(pauses, 'ms')} ms: ${collected}\n`,
  );
});
