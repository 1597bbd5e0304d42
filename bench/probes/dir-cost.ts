/**
 * What a directory costs on this host's file system, beside a file: the system calls a card's
 * reset makes (a local sandbox's card has three directories). The reason a card's directories are
 * reused when nothing can hold them (libs/sandbox/src/local/tree-reuse.ts).
 *
 *   npx tsx bench/probes/dir-cost.ts [--dir D] [--ops N]   # defaults: the OS temp dir, 3000
 *
 * Wall time per call, and the process's system CPU per call (the rest is waiting, for the journal
 * on ext4). The baseline is a small file's create and unlink, in the same directory, same run.
 */
import { mkdirSync, mkdtempSync, rmSync, rmdirSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

const { values } = parseArgs({ options: { dir: { type: 'string', default: tmpdir() }, ops: { type: 'string', default: '3000' } } });
const OPS = Number(values.ops);
const base = mkdtempSync(join(values.dir, 'lanes-dir-cost-'));
const paths = Array.from({ length: OPS }, (_, i) => join(base, `e${i}`));

/** Wall and system µs per call of `fn` over every path. */
function measure(fn: (path: string) => void): { wallUs: number; sysUs: number } {
  const r0 = process.resourceUsage();
  const t0 = performance.now();
  for (const p of paths) fn(p);
  const wallUs = ((performance.now() - t0) * 1000) / OPS;
  return { wallUs, sysUs: (process.resourceUsage().systemCPUTime - r0.systemCPUTime) / OPS };
}

try {
  const rows: Array<[string, { wallUs: number; sysUs: number }]> = [];
  rows.push(['file: create (write 2 bytes)', measure((p) => writeFileSync(p, '{}'))]);
  rows.push(['file: unlink', measure((p) => unlinkSync(p))]);
  rows.push(['directory: mkdir', measure((p) => mkdirSync(p))]);
  rows.push(['directory: rmdir', measure((p) => rmdirSync(p))]);
  // One at a time, as a card's reset goes: made, then removed before the next.
  rows.push([
    'file: create, then unlink, one at a time',
    measure((p) => {
      writeFileSync(p, '{}');
      unlinkSync(p);
    }),
  ]);
  rows.push([
    'directory: mkdir, then rmdir, one at a time',
    measure((p) => {
      mkdirSync(p);
      rmdirSync(p);
    }),
  ]);
  const fileUs = rows[4]![1].wallUs;
  const dirUs = rows[5]![1].wallUs;
  console.log(`\ndirectory cost in ${values.dir} (${OPS} of each)\n`);
  console.log('| call | wall per call | system CPU per call |');
  console.log('|---|---|---|');
  for (const [label, m] of rows) console.log(`| ${label} | ${m.wallUs.toFixed(1)} µs | ${m.sysUs.toFixed(1)} µs |`);
  console.log(`| a directory made and removed, against a file, one at a time | ${(dirUs / fileUs).toFixed(2)}× | |`);
  const json = Object.fromEntries(rows.map(([label, m]) => [label, { wallUs: Number(m.wallUs.toFixed(1)), sysUs: Number(m.sysUs.toFixed(1)) }]));
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'dir-cost', dir: values.dir, ops: OPS, ...json, dirOverFile: Number((dirUs / fileUs).toFixed(2)) })}`);
} finally {
  rmSync(base, { recursive: true, force: true });
}
