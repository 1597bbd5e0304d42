/**
 * Does a long-running stack hold on to memory card after card? One process, the whole stack
 * (API, worker with 4 slots on local sandboxes, supervisor; `startTestStack`), trivial cards
 * (`agent: ["true"]`) posted in bulks of 100.
 *
 *   npx tsx --conditions=@lanes/source bench/memory.ts [--cards N] [--step S]   # defaults 6000, 600
 *
 * After every S cards are done, the process collects garbage twice and reads its heap and resident
 * memory. The figure is the heap's growth per 1,000 cards over the second half of the run, after
 * the bounded caches have filled; a leak shows as a slope that does not fall to about zero.
 * The baseline is the same process before any card. Target: no growth per card, read as a slope of
 * at most TARGET_KIB_PER_1000_CARDS (half a KiB per card), printed with its verdict.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { Redis } from 'ioredis';
import { QUEUE_PREFIX, queueName } from '@lanes/queue';
import { startRedis, startTestStack, waitFor } from '../test/harness/index.js';

const { values } = parseArgs({ options: { cards: { type: 'string', default: '6000' }, step: { type: 'string', default: '600' } } });
const CARDS = Number(values.cards);
const STEP = Number(values.step);
const BULK = 100;
const LANE = 'bench';
const RUN_TIMEOUT_MS = 600_000;
const POLL_MS = 50;
const MiB = 1024 * 1024;
/** Above this the heap grows with the cards: half a KiB per card, beyond what the spread of the readings alone gives over a default run's second half. */
const TARGET_KIB_PER_1000_CARDS = 512;

// A collection on demand, without asking whoever starts this script for --expose-gc.
setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
const measure = () => {
  gc();
  gc();
  const m = process.memoryUsage();
  return { heapMiB: m.heapUsed / MiB, rssMiB: m.rss / MiB };
};

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-memory-'));
const conn = new Redis(redis.url);
try {
  const t = await startTestStack(redis.url, [{ name: LANE, slots: 4, agent: ['true'] }], { sandboxDir: join(dir, 'stack') });
  const rows: Array<{ cards: number; heapMiB: number; rssMiB: number }> = [{ cards: 0, ...measure() }];
  try {
    let sent = 0;
    while (sent < CARDS) {
      const until = Math.min(CARDS, sent + STEP);
      for (; sent < until; sent += BULK) {
        const cards = Array.from({ length: Math.min(BULK, until - sent) }, (_, i) => ({ id: `card-${sent + i}`, lane: LANE, title: 'trivial' }));
        const res = await t.api.request('POST', '/v1/cards', { cards });
        if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      }
      sent = until;
      await waitFor(`${sent} cards done`, async () => (await conn.zcard(`${QUEUE_PREFIX}:${queueName(LANE)}:completed`)) >= sent || undefined, {
        intervalMs: POLL_MS,
        timeoutMs: RUN_TIMEOUT_MS,
      });
      rows.push({ cards: sent, ...measure() });
      console.error(`${sent} cards: heap ${rows.at(-1)!.heapMiB.toFixed(1)} MiB`);
    }
  } finally {
    await t.stop();
  }
  const half = rows.filter((r) => r.cards >= CARDS / 2);
  const first = half[0]!;
  const last = half.at(-1)!;
  const slopeKiBPer1000 = last.cards > first.cards ? ((last.heapMiB - first.heapMiB) * 1024 * 1000) / (last.cards - first.cards) : Number.NaN;
  console.log(`\nmemory benchmark (${CARDS} trivial cards, 4 slots, heap read after two collections every ${STEP} cards)\n`);
  console.log('| cards done | heap used | resident |');
  console.log('|---|---|---|');
  for (const r of rows) console.log(`| ${r.cards} | ${r.heapMiB.toFixed(1)} MiB | ${r.rssMiB.toFixed(0)} MiB |`);
  console.log(
    `\nheap growth per 1,000 cards over the second half (${first.cards} → ${last.cards}): ${slopeKiBPer1000.toFixed(0)} KiB; target ≤ ${TARGET_KIB_PER_1000_CARDS} KiB: ${slopeKiBPer1000 <= TARGET_KIB_PER_1000_CARDS ? 'met' : 'MISSED'}`,
  );
  console.log(
    `BENCH_JSON ${JSON.stringify({ bench: 'memory', cards: CARDS, step: STEP, heapKiBPer1000CardsSecondHalf: Number(slopeKiBPer1000.toFixed(1)), rows: rows.map((r) => ({ cards: r.cards, heapMiB: Number(r.heapMiB.toFixed(2)), rssMiB: Number(r.rssMiB.toFixed(1)) })) })}`,
  );
} finally {
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
