/**
 * The listing figure: `GET /v1/cards` over 3/20 of `--cards` (1,500) and then all of them (10,000, the least) across 3 lanes.
 *
 *   npx tsx --conditions=@lanes/source bench/card-list.ts [--requests N] [--cards N]
 *
 * The API runs in a process of its own (`lanes api`, as in a container) against a private
 * redis-server; this process fills Redis through CardStore (records, then moves: half done, a fifth
 * failed, a fifth queued, a tenth blocked) and is the client, one request at a time over keep-alive.
 * Each query is timed `--requests` times at each size, after a warm-up, the queries interleaved
 * round by round so load drift hits them alike.
 *
 * Baseline, in the same run and interleaved with the rest: `GET /v1/cards/:id` of one card (one
 * HGETALL and one LRANGE): what a request costs on this box with O(1) Redis work behind it.
 *
 * Targets (issue 27): `?lane=b&state=failed&limit=50` p99 under 20 ms at 10,000 cards; and O(page):
 * each listing whose page is full at both sizes answers at 10,000 cards within 1.5× of its median at
 * 1,500 (a page that walked the cards would grow about sevenfold). Medians, because p99 on a shared
 * box moves with its neighbours; the p99s are printed beside them. Two rows are at 10,000 cards
 * only (their pages are not full at 1,500): the 10th page, and a page of 200.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults, type Card, type CardPage } from '@lanes/contracts';
import { CardStore, createRedis, keys, type CardMove } from '@lanes/queue';
import { PROJECT_DIR, freePort } from '@lanes/cli';
import { startRedis, waitFor } from '../test/harness/index.js';
import { percentile } from './support/stats.js';

const { values } = parseArgs({ options: { requests: { type: 'string', default: '300' }, cards: { type: 'string', default: '10000' } } });
const REQUESTS = Number(values.requests);
const TOTAL = Number(values.cards);
const SMALL = Math.round((TOTAL * 3) / 20);
const WARMUP = 30;
const LANES = ['a', 'b', 'c'];
const P99_TARGET_MS = 20;
const GROWTH_TARGET = 1.5;
/**
 * Lane b holds a fifteenth of the cards as failed ones. Below this many cards, its 2nd page at the
 * small size and its 10th page at the full size are not full, and a growth ratio would compare
 * pages of different lengths.
 */
const MIN_CARDS = 10_000;
if (!(TOTAL >= MIN_CARDS)) throw new Error(`--cards ${values.cards}: must be at least ${MIN_CARDS}, so that every page compared is full`);

const redisServer = await startRedis();
const redis = createRedis(redisServer.url);
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-list-'));
let api: ChildProcess | undefined;
try {
  const config = join(dir, 'lanes.json');
  writeFileSync(config, JSON.stringify({ lanes: LANES.map((name) => ({ name, agent: ['true'], maxOpenCards: defaults.MAX_OPEN_CARDS_LIMIT })) }));
  const port = await freePort();
  api = spawn(process.execPath, [join(PROJECT_DIR, 'apps/cli/bin/lanes.js'), 'api', '--config', config], {
    env: { PATH: process.env.PATH ?? '', HOME: dir, REDIS_URL: redisServer.url, LANES_PORT: String(port), LANES_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const url = `http://127.0.0.1:${port}`;
  await waitFor('the API to answer', async () => (await fetch(`${url}/healthz`).catch(() => undefined))?.ok, { timeoutMs: 60_000 });

  const store = new CardStore({ redis, now: Date.now });
  let made = 0;
  /** Cards `made`…`upTo`, lane by turn, and their moves: i % 10 of 0-4 done, 5-6 failed, 7-8 queued, 9 blocked. */
  const fill = async (upTo: number) => {
    const cards: Card[] = [];
    for (; made < upTo; made++) cards.push({ id: `bench-${String(made).padStart(6, '0')}`, lane: LANES[made % LANES.length]!, title: `card ${made}`, priority: 0 });
    for (let i = 0; i < cards.length; i += 500) await store.createMany(cards.slice(i, i + 500));
    const start = made - cards.length;
    for (let i = 0; i < cards.length; i += 200) {
      await Promise.all(
        cards.slice(i, i + 200).map(async (card, j) => {
          const kind = (start + i + j) % 10;
          if (kind === 7 || kind === 8) return;
          const token = `run-${card.id}`;
          await redis.set(keys.jobLock(card.lane, card.id), token);
          const run = { kind: 'run', token } as const;
          await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, run);
          const end: CardMove =
            kind < 5
              ? { to: 'done', attempt: 1 }
              : kind < 7
                ? { to: 'failed', attempt: 1, failedReason: 'command-failed' }
                : { to: 'blocked', attempt: 1, blockedReason: 'sandbox-dead', retryAt: Date.now() + 3_600_000 };
          await store.transition(card, end, run);
          await redis.del(keys.jobLock(card.lane, card.id));
        }),
      );
    }
  };

  /** The cursor after `pages` pages of lane b's failed cards. */
  const cursorAfter = async (pages: number): Promise<string> => {
    let cursor: string | undefined;
    for (let i = 0; i < pages; i++) {
      const page = (await (await fetch(`${url}/v1/cards?lane=b&state=failed&limit=50${cursor ? `&cursor=${cursor}` : ''}`)).json()) as CardPage;
      if (!page.nextCursor) break;
      cursor = page.nextCursor;
    }
    return cursor ?? '';
  };
  /** [name, path, whether its page is full at both sizes]. */
  const queries = async (large: boolean): Promise<Array<[string, string, boolean]>> => [
    ['baseline: GET /v1/cards/:id', '/v1/cards/bench-000005', true],
    ['?lane=b&state=failed&limit=50', '/v1/cards?lane=b&state=failed&limit=50', true],
    ['the same, 2nd page', `/v1/cards?lane=b&state=failed&limit=50&cursor=${await cursorAfter(1)}`, true],
    ['?lane=b&limit=50 (6 sets)', '/v1/cards?lane=b&limit=50', true],
    ['?limit=50 (3 lanes, 18 sets)', '/v1/cards?limit=50', true],
    ...(large
      ? ([
          ['?lane=b&state=failed&limit=50, 10th page', `/v1/cards?lane=b&state=failed&limit=50&cursor=${await cursorAfter(9)}`, false],
          ['?lane=b&state=failed&limit=200', '/v1/cards?lane=b&state=failed&limit=200', false],
        ] as Array<[string, string, boolean]>)
      : []),
  ];
  const time = async (path: string) => {
    const t0 = performance.now();
    const res = await fetch(`${url}${path}`);
    await res.arrayBuffer();
    if (res.status !== 200) throw new Error(`${path} answered ${res.status}`);
    return performance.now() - t0;
  };
  const measure = async (large: boolean) => {
    const qs = await queries(large);
    for (let i = 0; i < WARMUP; i++) for (const [, path] of qs) await time(path);
    const samples = qs.map(() => [] as number[]);
    for (let round = 0; round < REQUESTS; round++) {
      // Alternating which query goes first, so none always follows the same one.
      const order = round % 2 === 0 ? qs.map((_, i) => i) : qs.map((_, i) => qs.length - 1 - i);
      for (const i of order) samples[i]!.push(await time(qs[i]![1]));
    }
    return qs.map(([name, , both], i) => ({ name, both, p50: percentile(samples[i]!, 50), p99: percentile(samples[i]!, 99) }));
  };

  await fill(SMALL);
  const small = await measure(false);
  await fill(TOTAL);
  const large = await measure(true);

  const base = large[0]!;
  const rows = large.map((l, i) => {
    const s = l.both ? small[i] : undefined;
    return { name: l.name, smallP50: s?.p50, smallP99: s?.p99, p50: l.p50, p99: l.p99, growth: s ? l.p50 / s.p50 : undefined, vsBase: l.p50 / base.p50 };
  });
  const target = rows[1]!;
  const p99Ok = target.p99 < P99_TARGET_MS;
  const growthOk = rows.slice(1).every((r) => r.growth === undefined || r.growth <= GROWTH_TARGET);
  console.log(`\n${TOTAL.toLocaleString('en')} cards across ${LANES.length} lanes (and ${SMALL.toLocaleString('en')} before), ${REQUESTS} requests per query and size\n`);
  console.log(`| query | p50 at ${SMALL} | p99 at ${SMALL} | p50 at ${TOTAL} | p99 at ${TOTAL} | p50 ${TOTAL} / ${SMALL} | p50 / baseline |`);
  console.log('|---|---|---|---|---|---|---|');
  for (const r of rows) {
    console.log(
      `| ${r.name} | ${ms(r.smallP50)} | ${ms(r.smallP99)} | ${ms(r.p50)} | ${ms(r.p99)} | ${r.growth === undefined ? '-' : `${r.growth.toFixed(2)}×`} | ${r.vsBase.toFixed(2)}× |`,
    );
  }
  console.log(`\n${p99Ok ? 'PASS' : 'FAIL'}: ?lane=b&state=failed&limit=50 p99 ${ms(target.p99)} at ${TOTAL} cards (target < ${P99_TARGET_MS} ms)`);
  console.log(`${growthOk ? 'PASS' : 'FAIL'}: O(page): every listing's median at ${TOTAL} cards within ${GROWTH_TARGET}× of its median at ${SMALL}`);
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'card-list', cards: TOTAL, requests: REQUESTS, rows, pass: p99Ok && growthOk })}`);
  process.exitCode = p99Ok && growthOk ? 0 : 1;
} finally {
  api?.kill('SIGTERM');
  if (api && api.exitCode === null) await new Promise((r) => api!.once('exit', r));
  redis.disconnect();
  await redisServer.stop();
  rmSync(dir, { recursive: true, force: true });
}

function ms(v: number | undefined): string {
  return v === undefined ? '-' : `${v.toFixed(2)} ms`;
}
