/**
 * The top self-time functions of a V8 CPU profile (`node --cpu-prof`), as a markdown table.
 *
 *   npx tsx bench/probes/cpuprofile-top.ts <file.cpuprofile> [--top N]
 *
 * Self time is the sampled time a function was on top of the stack. `(idle)` is the process
 * waiting (for Redis, a child, a timer); `(program)` and `(garbage collector)` are V8's own.
 */
import { parseArgs } from 'node:util';
import { frameLabel, loadProfile } from './cpuprofile.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { top: { type: 'string', default: '25' } } });
const file = positionals[0];
if (!file) throw new Error('usage: cpuprofile-top.ts <file.cpuprofile> [--top N]');
const profile = loadProfile(file);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const selfUs = new Map<string, number>();
let totalUs = 0;
profile.samples.forEach((id, i) => {
  const node = byId.get(id);
  if (!node) return;
  const dt = profile.timeDeltas[i] ?? 0;
  totalUs += dt;
  const key = frameLabel(node);
  selfUs.set(key, (selfUs.get(key) ?? 0) + dt);
});
const top = [...selfUs].sort((a, b) => b[1] - a[1]).slice(0, Number(values.top));
console.log(`profile ${file}: ${(totalUs / 1e6).toFixed(1)} s sampled\n`);
console.log('| self % | self ms | function |');
console.log('|---|---|---|');
for (const [key, us] of top) console.log(`| ${((100 * us) / totalUs).toFixed(1)} | ${(us / 1000).toFixed(0)} | \`${key}\` |`);
