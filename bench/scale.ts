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
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { startRedis, startTestStack, waitFor } from '../test/harness/index.js';

const { values } = parseArgs({ options: { lanes: { type: 'string', default: '20' }, slots: { type: 'string', default: '10' } } });
const LANES = Number(values.lanes);
const SLOTS = Number(values.slots);
const ALL_LIVE_TIMEOUT_MS = 300_000;
const POLL_MS = 100;
const MiB = 1024 * 1024;

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-scale-'));
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
      redisConnections: connections,
      rssMiB: Math.round(rssMiB),
      rssBeforeMiB: Math.round(rssBeforeMiB),
    };
    console.log(`\nscale benchmark (one process, ${LANES} lanes × ${SLOTS} slots, local provider)\n`);
    console.log('| measurement | figure |');
    console.log('|---|---|');
    console.log(`| time until all ${LANES * SLOTS} sandboxes are live | ${(allLiveMs / 1000).toFixed(1)} s |`);
    console.log(`| Redis connections held by the stack | ${connections} |`);
    console.log(`| resident memory of the process (before the stack: ${rssBeforeMiB.toFixed(0)} MiB) | ${rssMiB.toFixed(0)} MiB |`);
    console.log(`BENCH_JSON ${JSON.stringify(result)}`);
  } finally {
    await t.stop();
  }
} finally {
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
