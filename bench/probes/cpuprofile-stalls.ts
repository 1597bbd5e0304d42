/**
 * The event loop's longest busy stretches in a V8 CPU profile (`node --cpu-prof`), and what ran
 * in them: what keeps a probe like `/healthz` waiting.
 *
 *   npx tsx bench/probes/cpuprofile-stalls.ts <file.cpuprofile> [--min-ms M] [--top N]   # defaults 10, 15
 *
 * A stretch is a run of samples with no `(idle)` between them. For each of the N longest it prints
 * its length, the share of it spent in `(garbage collector)`, the outermost frame of lanes' own code
 * (apps/, libs/) or of a package that most of its samples pass through, and its top self-time
 * functions.
 */
import { parseArgs } from 'node:util';
import { frameLabel as label, loadProfile } from './cpuprofile.js';

const { values, positionals } = parseArgs({ allowPositionals: true, options: { 'min-ms': { type: 'string', default: '10' }, top: { type: 'string', default: '15' } } });
const file = positionals[0];
if (!file) throw new Error('usage: cpuprofile-stalls.ts <file.cpuprofile> [--min-ms M] [--top N]');
const profile = loadProfile(file);
const byId = new Map(profile.nodes.map((n) => [n.id, n]));
const parent = new Map<number, number>();
for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);

/** The outermost frame of a sample's stack that is lanes' code or a package's, not Node's internals. */
const outermost = (id: number): string => {
  let found = '';
  for (let cur: number | undefined = id; cur !== undefined; cur = parent.get(cur)) {
    const url = byId.get(cur)!.callFrame.url;
    if (/\/(apps|libs)\//.test(url) || url.includes('node_modules/')) found = label(byId.get(cur)!);
  }
  return found || label(byId.get(id)!);
};

type Stretch = { us: number; gcUs: number; outer: Map<string, number>; self: Map<string, number> };
const stretches: Stretch[] = [];
let cur: Stretch | undefined;
profile.samples.forEach((id, i) => {
  const node = byId.get(id)!;
  const dt = profile.timeDeltas[i + 1] ?? 0;
  const name = node.callFrame.functionName;
  if (name === '(idle)') {
    if (cur) stretches.push(cur);
    cur = undefined;
    return;
  }
  cur ??= { us: 0, gcUs: 0, outer: new Map(), self: new Map() };
  cur.us += dt;
  if (name === '(garbage collector)') cur.gcUs += dt;
  const o = name === '(garbage collector)' ? '(garbage collector)' : outermost(id);
  cur.outer.set(o, (cur.outer.get(o) ?? 0) + dt);
  const s = label(node);
  cur.self.set(s, (cur.self.get(s) ?? 0) + dt);
});
if (cur) stretches.push(cur);

const minUs = Number(values['min-ms']) * 1000;
const long = stretches.filter((s) => s.us >= minUs).sort((a, b) => b.us - a.us);
const totalBusy = stretches.reduce((a, s) => a + s.us, 0);
const top = (m: Map<string, number>, n: number) =>
  [...m]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([k, us]) => `${k} ${(us / 1000).toFixed(1)}`)
    .join('; ');
console.log(
  `profile ${file}: ${stretches.length} busy stretches, ${long.length} of ≥ ${values['min-ms']} ms (${((100 * long.reduce((a, s) => a + s.us, 0)) / totalBusy).toFixed(1)} % of busy time)\n`,
);
console.log('| ms | GC ms | outermost frames (ms) | top self (ms) |');
console.log('|---|---|---|---|');
for (const s of long.slice(0, Number(values.top))) {
  console.log(`| ${(s.us / 1000).toFixed(1)} | ${(s.gcUs / 1000).toFixed(1)} | ${top(s.outer, 3)} | ${top(s.self, 3)} |`);
}
