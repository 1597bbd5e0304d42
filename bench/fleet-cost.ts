/**
 * What an idle fleet costs as it grows: 10, 100 and 1,000 slots across 1, 2 and 4 worker processes,
 * on the bench-only null provider (null-provider.ts: sandboxes exist at once, exec answers at once),
 * so the figures are lanes' own overhead, not process forks.
 *
 *   npx tsx --conditions=@lanes/source bench/fleet-cost.ts [--slots 10,100,1000] [--workers 1,2,4] [--idle-ms MS] [--requests N] [--sweeps N]
 *   # defaults: those sizes, 6000 ms (three heartbeats), 100, 20
 *
 * Each configuration gets a fresh redis-server and its own processes (bench/support/stack-process.ts): the
 * API, the supervisor, and W workers, `lanes up`'s heartbeat (2 s) and sweep (1 s). The slots are
 * lanes of 100 (one lane below 100 slots), each hosted by every worker, the slots shared among them.
 * Once `GET /v1/lanes` shows every slot live and two heartbeats have passed, it measures:
 *
 * 1. Redis commands per second while idle: INFO commandstats before and after an idle window (the
 *    bench's own two INFO calls left out): heartbeats, slot publishes, supervisor sweeps, idle probes,
 *    BullMQ's blocking pops and stalled checks.
 * 2. The supervisor's sweep time: N sweeps one after another in the supervisor's process, timed there.
 * 3. `GET /v1/lanes` latency, N requests one after another over keep-alive, p50 / p99.
 * 4. Resident memory of the API, the supervisor and each worker process.
 *
 * At the end, `redis-benchmark -q -n 100000 -t get,set` against a redis-server of the same build on
 * this box, for what it serves; the idle fleet's commands at the largest size are compared with it.
 * Targets (issue 29): each figure grows at most linearly with slots (the per-slot constant is
 * printed); the idle commands at 1,000 slots are < 5 % of what redis-benchmark measured.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest } from 'node:http';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { defaults, type LaneConfigInput } from '@lanes/contracts';
import { startRedis, waitFor, type TestRedis } from '../test/harness/index.js';
import { startStackProcess, type StackChild } from './support/stack-client.js';
import { percentile as pct } from './support/stats.js';

const { values } = parseArgs({
  options: {
    slots: { type: 'string', default: '10,100,1000' },
    workers: { type: 'string', default: '1,2,4' },
    'idle-ms': { type: 'string', default: String(3 * defaults.DEFAULT_HEARTBEAT_INTERVAL_MS) },
    requests: { type: 'string', default: '100' },
    sweeps: { type: 'string', default: '20' },
  },
});
const SIZES = values.slots.split(',').map(Number);
const WORKERS = values.workers.split(',').map(Number);
const IDLE_MS = Number(values['idle-ms']);
const REQUESTS = Number(values.requests);
const SWEEPS = Number(values.sweeps);
const SLOTS_PER_LANE = 100;
const HEARTBEAT_MS = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS;
const MiB = 1024 * 1024;
const SHARE_TARGET = 0.05;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function getText(agent: Agent, url: string): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { agent }, (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        text += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    req.end();
  });
}

/** Calls per command from INFO commandstats. */
async function commandCalls(conn: Redis): Promise<Map<string, number>> {
  const info = await conn.info('commandstats');
  const out = new Map<string, number>();
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out.set(m[1]!, Number(m[2]));
  return out;
}

/** `total` slots of lanes of up to SLOTS_PER_LANE, as worker `w` of `workers` hosts them (the slots shared out, the first workers one more). */
function lanesFor(total: number, workers: number, w: number): Array<LaneConfigInput & { slots: number }> {
  const laneCount = Math.max(1, Math.ceil(total / SLOTS_PER_LANE));
  return Array.from({ length: laneCount }, (_, l) => {
    const laneSlots = Math.floor(total / laneCount) + (l < total % laneCount ? 1 : 0);
    const mine = Math.floor(laneSlots / workers) + (w < laneSlots % workers ? 1 : 0);
    return { name: `fleet-${l}`, slots: Math.max(1, mine), agent: ['true'] };
  });
}

interface Figures {
  slots: number;
  workers: number;
  commandsPerS: number;
  commandsPerSlotPerS: number;
  topCommandsPerS: Record<string, number>;
  sweepP50Ms: number;
  sweepP99Ms: number;
  lanesP50Ms: number;
  lanesP99Ms: number;
  apiRssMiB: number;
  supervisorRssMiB: number;
  workerRssMiB: number[];
}

async function measure(total: number, workers: number, dir: string): Promise<Figures> {
  const redis: TestRedis = await startRedis();
  const conn = new Redis(redis.url);
  const http = new Agent({ keepAlive: true });
  const children: StackChild[] = [];
  try {
    const base = { redisUrl: redis.url, provider: 'null' as const, heartbeatIntervalMs: HEARTBEAT_MS, sandboxDir: join(dir, `s${total}-w${workers}`) };
    // The API and the supervisor see every lane at the most slots one worker hosts.
    const allLanes = lanesFor(total, 1, 0).map((l) => ({ ...l, slots: lanesFor(total, workers, 0).find((x) => x.name === l.name)!.slots }));
    // Started together (each is a tsx process that takes a while to load); every one is stopped at the end, started or not.
    const starting = [
      ...Array.from({ length: workers }, (_, w) => startStackProcess({ ...base, lanes: lanesFor(total, workers, w), parts: { api: false, worker: true, supervisor: false } })),
      startStackProcess({ ...base, lanes: allLanes, parts: { api: true, worker: false, supervisor: false } }),
      startStackProcess({ ...base, lanes: allLanes, parts: { api: false, worker: false, supervisor: true } }),
    ];
    const settled = await Promise.allSettled(starting);
    for (const r of settled) if (r.status === 'fulfilled') children.push(r.value);
    const failed = settled.find((r) => r.status === 'rejected');
    if (failed) throw failed.reason;
    const [api, supervisor] = children.slice(workers) as [StackChild, StackChild];
    const lanesUrl = `${api.url!}/v1/lanes`;
    const expected = Array.from({ length: workers }, (_, w) => lanesFor(total, workers, w))
      .flat()
      .reduce((n, l) => n + l.slots, 0);
    await waitFor(
      `${expected} slots live`,
      async () => {
        const res = await getText(http, lanesUrl);
        const body = JSON.parse(res.text) as { lanes: Array<{ slots: Array<{ sandbox?: { state: string } }> }> };
        const live = body.lanes.flatMap((l) => l.slots).filter((s) => s.sandbox?.state === 'live').length;
        return live >= expected || undefined;
      },
      { intervalMs: 200, timeoutMs: 120_000 },
    );
    await sleep(2 * HEARTBEAT_MS);

    // 1. Idle commands per second.
    const before = await commandCalls(conn);
    const t0 = performance.now();
    await sleep(IDLE_MS);
    const after = await commandCalls(conn);
    const seconds = (performance.now() - t0) / 1000;
    const delta = new Map<string, number>();
    for (const [name, n] of after) delta.set(name, n - (before.get(name) ?? 0) - (name === 'info' ? 1 : 0));
    const commands = [...delta.values()].reduce((a, b) => a + b, 0);
    const top = Object.fromEntries(
      [...delta]
        .filter(([, n]) => n > 0)
        .sort((a, b) => b[1] - a[1])
        .slice(0, 6)
        .map(([k, n]) => [k, Number((n / seconds).toFixed(1))]),
    );

    // 2. Sweep time, in the supervisor's process.
    const sweeps = await supervisor.sweeps(SWEEPS);
    // 3. GET /v1/lanes, after a warm-up.
    for (let i = 0; i < 10; i++) await getText(http, lanesUrl);
    const lanesMs: number[] = [];
    for (let i = 0; i < REQUESTS; i++) {
      const t = performance.now();
      const res = await getText(http, lanesUrl);
      if (res.status !== 200) throw new Error(`GET /v1/lanes: ${res.status}`);
      lanesMs.push(performance.now() - t);
    }
    // 4. Resident memory.
    const workerRss = await Promise.all(children.slice(0, workers).map((c) => c.rss()));
    const apiRss = await api.rss();
    const supervisorRss = await supervisor.rss();
    return {
      slots: total,
      workers,
      commandsPerS: Number((commands / seconds).toFixed(1)),
      commandsPerSlotPerS: Number((commands / seconds / total).toFixed(3)),
      topCommandsPerS: top,
      sweepP50Ms: Number(pct(sweeps, 50).toFixed(2)),
      sweepP99Ms: Number(pct(sweeps, 99).toFixed(2)),
      lanesP50Ms: Number(pct(lanesMs, 50).toFixed(2)),
      lanesP99Ms: Number(pct(lanesMs, 99).toFixed(2)),
      apiRssMiB: Number((apiRss.rssBytes / MiB).toFixed(0)),
      supervisorRssMiB: Number((supervisorRss.rssBytes / MiB).toFixed(0)),
      workerRssMiB: workerRss.map((r) => Number((r.rssBytes / MiB).toFixed(0))),
    };
  } finally {
    for (const c of children.reverse()) await c.stop();
    http.destroy();
    conn.disconnect();
    await redis.stop();
  }
}

/** redis-benchmark's requests per second for GET and SET on a fresh redis-server of the same build. */
async function redisBenchmark(): Promise<{ get: number; set: number }> {
  const redis = await startRedis();
  try {
    const { port } = new URL(redis.url);
    const out = execFileSync('redis-benchmark', ['-q', '-n', '100000', '-t', 'get,set', '-p', port], { encoding: 'utf8' });
    const rate = (name: string) => Number(new RegExp(`${name}: ([\\d.]+) requests per second`).exec(out)?.[1] ?? Number.NaN);
    return { get: rate('GET'), set: rate('SET') };
  } finally {
    await redis.stop();
  }
}

const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-fleet-'));
try {
  const figures: Figures[] = [];
  for (const workers of WORKERS) {
    for (const total of SIZES) {
      const f = await measure(total, workers, dir);
      figures.push(f);
      console.error(
        `${total} slots, ${workers} workers: ${f.commandsPerS} commands/s (${f.commandsPerSlotPerS}/slot), sweep p50 ${f.sweepP50Ms} ms, GET /v1/lanes p99 ${f.lanesP99Ms} ms, RSS api ${f.apiRssMiB} / supervisor ${f.supervisorRssMiB} / workers ${f.workerRssMiB.join(', ')} MiB`,
      );
    }
  }
  const bench = await redisBenchmark();
  const served = Math.min(bench.get, bench.set);
  const load = loadavg().map((x) => Number(x.toFixed(2)));
  console.log(`\nfleet-cost benchmark (null provider; heartbeat ${HEARTBEAT_MS} ms; idle window ${IDLE_MS} ms; load average ${load.join(' ')})\n`);
  console.log('| slots | workers | Redis commands/s idle (per slot) | sweep p50 / p99 | `GET /v1/lanes` p50 / p99 | RSS: API / supervisor / each worker |');
  console.log('|---|---|---|---|---|---|');
  for (const f of figures) {
    console.log(
      `| ${f.slots} | ${f.workers} | ${f.commandsPerS} (${f.commandsPerSlotPerS}) | ${f.sweepP50Ms} / ${f.sweepP99Ms} ms | ${f.lanesP50Ms} / ${f.lanesP99Ms} ms | ${f.apiRssMiB} / ${f.supervisorRssMiB} / ${f.workerRssMiB.join(', ')} MiB |`,
    );
  }
  // Per-slot constants and growth, from the smallest to the largest size at each worker count.
  console.log(
    `\n| workers | figure | per slot (slope, smallest → largest size) | largest / smallest, against slots ×${Math.max(...SIZES) / Math.min(...SIZES)} | at most linear |`,
  );
  console.log('|---|---|---|---|---|');
  const growth: Record<string, unknown> = {};
  let linear = true;
  const small = Math.min(...SIZES);
  const large = Math.max(...SIZES);
  for (const workers of WORKERS) {
    const a = figures.find((f) => f.workers === workers && f.slots === small)!;
    const b = figures.find((f) => f.workers === workers && f.slots === large)!;
    const rows: Array<[string, number, number, string]> = [
      ['Redis commands/s', a.commandsPerS, b.commandsPerS, 'commands/s'],
      ['sweep p50', a.sweepP50Ms, b.sweepP50Ms, 'ms'],
      ['`GET /v1/lanes` p99', a.lanesP99Ms, b.lanesP99Ms, 'ms'],
      ['worker RSS (sum)', a.workerRssMiB.reduce((x, y) => x + y, 0), b.workerRssMiB.reduce((x, y) => x + y, 0), 'MiB'],
      ['API RSS', a.apiRssMiB, b.apiRssMiB, 'MiB'],
    ];
    for (const [name, x, y, unit] of rows) {
      const slope = (y - x) / (large - small);
      const ratio = y / x;
      const ok = ratio <= large / small;
      linear &&= ok;
      growth[`w${workers} ${name}`] = { perSlot: Number(slope.toFixed(4)), ratio: Number(ratio.toFixed(2)) };
      console.log(`| ${workers} | ${name} | ${slope.toFixed(4)} ${unit} | ${ratio.toFixed(2)}× | ${ok ? '✔' : '✘'} |`);
    }
  }
  const largest = figures.filter((f) => f.slots === large);
  const worst = Math.max(...largest.map((f) => f.commandsPerS));
  const share = worst / served;
  console.log(
    `\nredis-benchmark -q -n 100000 -t get,set (same build, this box): GET ${bench.get.toFixed(0)}, SET ${bench.set.toFixed(0)} requests/s; the idle fleet at ${large} slots sends at most ${worst} commands/s: ${(share * 100).toFixed(2)} % of the lesser (target < ${SHARE_TARGET * 100} % ${share < SHARE_TARGET ? '✔' : '✘'})`,
  );
  console.log(
    `BENCH_JSON ${JSON.stringify({ bench: 'fleet-cost', idleMs: IDLE_MS, heartbeatMs: HEARTBEAT_MS, figures, growth, redisBenchmark: bench, idleShareAtLargest: Number(share.toFixed(4)), linear, loadAverage: load })}`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
