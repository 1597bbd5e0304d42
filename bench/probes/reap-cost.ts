/**
 * What ending local sandboxes costs the process that ends them (a worker releasing idle slots or
 * scaling down): N sandboxes, each with a few background processes, terminated at once; the wall
 * time and this process's CPU per round. A reap's host-wide scan for the sandbox's marker runs on
 * the caller's event loop, so its CPU is time every other slot of that worker waits.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/reap-cost.ts [--sandboxes N] [--rounds R]   # defaults 8, 4
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalProvider, detectIsolation } from '@lanes/sandbox';

const { values } = parseArgs({ options: { sandboxes: { type: 'string', default: '8' }, rounds: { type: 'string', default: '4' } } });
const N = Number(values.sandboxes);
const ROUNDS = Number(values.rounds);
const dir = mkdtempSync(join(tmpdir(), 'lanes-probe-reap-'));
const isolation = detectIsolation();
const provider = createLocalProvider({ baseDir: dir, isolation });
try {
  console.log(`terminating ${N} local sandboxes at once (${isolation}), each with 4 background sleeps`);
  for (let r = 0; r < ROUNDS; r++) {
    const handles = await Promise.all(Array.from({ length: N }, (_, i) => provider.create({ image: 'local', tags: { lane: 'reap', slot: String(i), worker: 'probe' } })));
    await Promise.all(handles.map((h) => h.exec(['bash', '-c', 'for i in 1 2 3 4; do sleep 30 & done; true'])));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    await Promise.all(handles.map((h) => h.terminate()));
    const cpu = process.cpuUsage(cpu0);
    console.log(`round ${r + 1}: ${(performance.now() - t0).toFixed(0)} ms wall, ${((cpu.user + cpu.system) / 1000).toFixed(0)} ms of this process's CPU`);
  }
} finally {
  await provider.close();
  rmSync(dir, { recursive: true, force: true });
}
