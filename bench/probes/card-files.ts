/**
 * The per-card file work of the local provider, old pattern against new, in one process: 4
 * concurrent "slots", batches of N cards, alternating order, R rounds; median wall and CPU per card.
 *
 *   npx tsx bench/probes/card-files.ts [--dir DIR] [--cards N] [--rounds R]     # defaults: $TMPDIR, 300, 10
 *
 * old: rm out, rm work, mkdir out, mkdir work, mkdir the card dir, write card.json (before
 *      `a4cf6fd`). new: mkdir -p out and work at once (remove only what already existed), write
 *      card.json (make its directory only if the write says it is missing). Both then read
 *      result.json and blocked.json (missing), as the runner does.
 */
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { dir: { type: 'string', default: tmpdir() }, cards: { type: 'string', default: '300' }, rounds: { type: 'string', default: '10' } } });
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const SLOTS = 4;
const base = `${values.dir}/card-files-${process.pid}`;
const card = JSON.stringify({ id: 'x', lane: 'bench', title: 'trivial', metadata: {} }, null, 2);
const read = (path: string) => readFile(path).catch(() => undefined);

async function oldPattern(dir: string): Promise<void> {
  const [out, work] = [`${dir}/out`, `${dir}/work`];
  for (const target of [out, work]) await rm(target, { recursive: true, force: true });
  for (const target of [out, work]) await mkdir(target, { recursive: true });
  await mkdir(dirname(`${dir}/card.json`), { recursive: true });
  await writeFile(`${dir}/card.json`, card);
  await Promise.all([read(`${out}/result.json`), read(`${out}/blocked.json`)]);
}

async function newPattern(dir: string): Promise<void> {
  const [out, work] = [`${dir}/out`, `${dir}/work`];
  const reset = async (target: string) => {
    if ((await mkdir(target, { recursive: true }).catch(() => undefined)) !== undefined) return;
    await rm(target, { recursive: true, force: true });
    await mkdir(target, { recursive: true });
  };
  await Promise.all([out, work].map(reset));
  try {
    await writeFile(`${dir}/card.json`, card);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw error;
    await mkdir(dir, { recursive: true });
    await writeFile(`${dir}/card.json`, card);
  }
  await Promise.all([read(`${out}/result.json`), read(`${out}/blocked.json`)]);
}

let seq = 0;
async function batch(pattern: (dir: string) => Promise<void>): Promise<{ wallMs: number; cpuMs: number }> {
  const t0 = performance.now();
  const cpu0 = process.cpuUsage();
  let next = 0;
  await Promise.all(
    Array.from({ length: SLOTS }, async () => {
      while (next < CARDS) {
        next++;
        await pattern(`${base}/cards/c${seq++}`);
      }
    }),
  );
  const cpu = process.cpuUsage(cpu0);
  return { wallMs: (performance.now() - t0) / CARDS, cpuMs: (cpu.user + cpu.system) / 1000 / CARDS };
}

await mkdir(`${base}/cards`, { recursive: true });
try {
  const results = { old: [] as Array<{ wallMs: number; cpuMs: number }>, new: [] as Array<{ wallMs: number; cpuMs: number }> };
  for (let r = 0; r < ROUNDS; r++) {
    const order = r % 2 === 0 ? (['new', 'old'] as const) : (['old', 'new'] as const);
    for (const side of order) results[side].push(await batch(side === 'old' ? oldPattern : newPattern));
  }
  console.log(`card files, ${SLOTS} slots, ${ROUNDS} rounds of ${CARDS} cards per side, in ${values.dir}\n`);
  console.log('| pattern | wall per card, median | CPU per card, median (thread pool included) | wall per round |');
  console.log('|---|---|---|---|');
  for (const side of ['old', 'new'] as const) {
    const rs = results[side];
    console.log(
      `| ${side} | ${median(rs.map((x) => x.wallMs)).toFixed(3)} ms | ${median(rs.map((x) => x.cpuMs)).toFixed(3)} ms | ${rs.map((x) => x.wallMs.toFixed(2)).join(', ')} |`,
    );
  }
} finally {
  await rm(base, { recursive: true, force: true });
}
