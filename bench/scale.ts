/**
 * The scale figure: one process, 20 lanes × 10 slots on light local sandboxes.
 *
 *   npx tsx --conditions=@lanes/source bench/scale.ts [--lanes L] [--slots S]
 *
 * Starts the whole stack in this process (API, worker, supervisor; `startTestStack`) against a
 * private redis-server and reports: the time from the start until every slot's sandbox is live (as
 * `GET /v1/lanes` shows it), the Redis connections the stack holds (`CLIENT LIST`, the bench's own
 * left out), and this process's resident memory then, beside its resident memory before the stack
 * started (what tsx and the bench cost on their own).
 *
 * Baseline, measured first in the same run: the same number of sandboxes made all at once through
 * the local provider alone, each then answering one command (`echo canary`), as a slot's canary
 * does before it is live. It runs in a process of its own (this file, with tsx, as this one), so
 * its leftovers do not count in the stack's memory; a sandbox is a process forked from it, and a
 * fork costs the more the bigger the forking process is (bench/probes/spawn-cost.ts), so its size is
 * printed too. The ratio is what the stack adds on top of starting the processes.
 *
 * Target (issue 10): no regression. The figure is kept, not bounded: the ratio to the provider alone,
 * the connection count and the resident memory, compared with another commit's run on the same box.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { createLocalProvider } from '@lanes/sandbox';
import { startRedis, startTestStack, waitFor } from '../test/harness/index.js';

const { values } = parseArgs({
  options: {
    lanes: { type: 'string', default: '20' },
    slots: { type: 'string', default: '10' },
    /** Internal: run only the baseline, for N sandboxes under this directory, and print it as JSON. */
    'provider-alone': { type: 'string' },
    dir: { type: 'string' },
  },
});
const LANES = Number(values.lanes);
const SLOTS = Number(values.slots);
const ALL_LIVE_TIMEOUT_MS = 300_000;
const POLL_MS = 100;
const MiB = 1024 * 1024;

interface ProviderAlone {
  ms: number;
  rssMiB: number;
}

/** Until `count` sandboxes, made at once through the provider alone, have each answered a command. */
async function providerAlone(count: number, baseDir: string): Promise<ProviderAlone> {
  const provider = createLocalProvider({ baseDir });
  const rssMiB = process.memoryUsage().rss / MiB;
  const t0 = performance.now();
  const handles = await Promise.all(
    Array.from({ length: count }, async (_, i) => {
      const h = await provider.create({ image: 'local', tags: { lane: 'bench', slot: String(i), worker: 'bench' } });
      await h.exec(['echo', 'canary']);
      return h;
    }),
  );
  const ms = performance.now() - t0;
  await Promise.all(handles.map((h) => h.terminate()));
  await provider.close();
  return { ms, rssMiB };
}

if (values['provider-alone'] !== undefined) {
  process.stdout.write(JSON.stringify(await providerAlone(Number(values['provider-alone']), values.dir ?? tmpdir())));
} else {
  await main();
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-scale-'));
  const self = new URL(import.meta.url).pathname;
  const baseline = JSON.parse(
    execFileSync(process.execPath, [...process.execArgv, self, '--provider-alone', String(LANES * SLOTS), '--dir', join(dir, 'baseline')], { encoding: 'utf8' }),
  ) as ProviderAlone;
  const redis = await startRedis();
  const conn = new Redis(redis.url);
  try {
    const rssBeforeMiB = process.memoryUsage().rss / MiB;
    const lanes = Array.from({ length: LANES }, (_, i) => ({ name: `scale-${i}`, slots: SLOTS, agent: ['true'] }));
    const t0 = performance.now();
    const t = await startTestStack(redis.url, lanes, { sandboxDir: join(dir, 'stack') });
    try {
      const live = await waitFor(
        `all ${LANES * SLOTS} sandboxes live`,
        async () => {
          const n = (await t.api.lanes()).flatMap((l) => l.slots).filter((s) => s.sandbox?.state === 'live').length;
          return n >= LANES * SLOTS ? n : undefined;
        },
        { intervalMs: POLL_MS, timeoutMs: ALL_LIVE_TIMEOUT_MS },
      );
      const allLiveMs = performance.now() - t0;
      const clients = String(await conn.client('LIST'))
        .trim()
        .split('\n').length;
      const connections = clients - 1;
      const rssMiB = process.memoryUsage().rss / MiB;
      const result = {
        bench: 'scale',
        lanes: LANES,
        slots: SLOTS,
        sandboxesLive: live,
        allLiveMs: Math.round(allLiveMs),
        providerAloneMs: Math.round(baseline.ms),
        providerAloneProcessRssMiB: Math.round(baseline.rssMiB),
        allLiveOverProviderAlone: Number((allLiveMs / baseline.ms).toFixed(2)),
        redisConnections: connections,
        rssMiB: Math.round(rssMiB),
        rssBeforeMiB: Math.round(rssBeforeMiB),
      };
      console.log(`\nscale benchmark (one process, ${LANES} lanes × ${SLOTS} slots, local provider)\n`);
      console.log('| measurement | figure | baseline | ratio |');
      console.log('|---|---|---|---|');
      console.log(
        `| time until all ${LANES * SLOTS} sandboxes are live; baseline: as many made at once through the local provider alone (its process ${baseline.rssMiB.toFixed(0)} MiB resident), each answering one command | ${(allLiveMs / 1000).toFixed(1)} s | ${(baseline.ms / 1000).toFixed(1)} s | ${(allLiveMs / baseline.ms).toFixed(2)}× |`,
      );
      console.log(`| Redis connections held by the stack | ${connections} | | |`);
      console.log(`| resident memory of the process (before the stack: ${rssBeforeMiB.toFixed(0)} MiB) | ${rssMiB.toFixed(0)} MiB | | |`);
      console.log(`BENCH_JSON ${JSON.stringify(result)}`);
    } finally {
      await t.stop();
    }
  } finally {
    conn.disconnect();
    await redis.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
