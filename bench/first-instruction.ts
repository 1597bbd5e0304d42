/**
 * Time to the agent's first instruction: `POST /v1/cards` → the first line of the agent's code,
 * beside a bare BullMQ `Queue.add` → `Worker` → `spawn` of the same agent, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/first-instruction.ts [--idle N] [--gap-ms G] [--backlog B] [--rounds R] [--work-ms W] [--stack-process own|shared] [--other DIR] [--lanes-only]
 *
 * The agent is a bash script whose first act appends its card id and `$EPOCHREALTIME` (the wall
 * clock in µs, read without a fork) to a file; after it, it sleeps W ms (default 0) as the rest of
 * its work. Each card's figure is that stamp less the wall clock read just before its POST (or
 * `Queue.add`), so the whole path counts: HTTP, validation, the enqueue script, the worker's pop, the
 * card's move to running and its files, and the fork of bash inside the sandbox.
 *
 * Lanes: the whole stack (API, worker with 4 slots on local sandboxes, supervisor; `lanes up`'s
 * heartbeat) in a process of its own (bench/support/stack-process.ts), posted to from this process over a
 * keep-alive `node:http` agent, as a board posts from elsewhere. Baseline: a bare BullMQ `Worker`,
 * concurrency 4, in a process of its own (bench/support/bare-worker.ts), spawning `bash` on the same script
 * with the card id in its env, fed by `Queue.add` from this process on the same redis-server. So
 * each side's client runs here and each side's worker in a process of its own. `--stack-process
 * shared` runs the stack in this process instead, beside the client (undici's `fetch`), as
 * bench/throughput.ts does. Both sides are up and warmed for the whole run.
 *
 * 1. Idle: one card at a time, each waited for until its job is completed, N per side (default
 *    1,000), the sides alternating card by card (which goes first alternates too): of 1,000 the p99
 *    is the tenth slowest card, where of 200 one stall decided it (bench/README). `--gap-ms G` leaves
 *    the box quiet G ms before each idle card (default 0, back to back), as cards that arrive seconds
 *    apart find it: every process on the path has gone to sleep, and each hop between processes pays
 *    a wake-up.
 * 2. Backlog: R rounds per side, alternating which side goes first; each round enqueues B cards in
 *    one request (`POST {cards:[B]}` / `Queue.addBulk`), so every slot is busy at once and the rest
 *    wait; every card of the round counts, from the moment its request was sent.
 *
 * `--other DIR` adds a third side, alternated with the two: the same stack from another checkout
 * (a copy of the code before a change, with its own node_modules/@lanes links), on a lane of its own
 * on the same redis-server, so a change's before and after are measured in one run.
 *
 * Targets (issue 29): p50 ≤ 1.5× bare and p99 ≤ 2× bare, idle and under backlog.
 * `--lanes-only` runs the lanes side alone, for `node --cpu-prof`.
 */
import { Agent } from 'node:http';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { QUEUE_PREFIX, queueName } from '@lanes/queue';
import { startRedis, startTestStack, waitFor } from '../test/harness/index.js';
import { startBareWorkerProcess, type BareWorker } from './support/bare-worker-process.js';
import { boxCpuMs } from './support/box-cpu.js';
import { postJson } from './support/enqueue-client.js';
import { startStackProcess } from './support/stack-client.js';
import { median, percentile as pct } from './support/stats.js';

const { values } = parseArgs({
  options: {
    idle: { type: 'string', default: '1000' },
    backlog: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '6' },
    'work-ms': { type: 'string', default: '0' },
    warmup: { type: 'string', default: '40' },
    'stack-process': { type: 'string', default: 'own' },
    other: { type: 'string' },
    'lanes-only': { type: 'boolean', default: false },
    'gap-ms': { type: 'string', default: '0' },
  },
});
if (values['stack-process'] !== 'own' && values['stack-process'] !== 'shared') throw new Error('--stack-process is own or shared');
const STACK_SHARED = values['stack-process'] === 'shared';
const IDLE = Number(values.idle);
const BACKLOG = Number(values.backlog);
const ROUNDS = Number(values.rounds);
const WORK_MS = Number(values['work-ms']);
const WARMUP = Number(values.warmup);
const LANES_ONLY = values['lanes-only'];
const GAP_MS = Number(values['gap-ms']);
if (!Number.isFinite(GAP_MS) || GAP_MS < 0) throw new Error(`--gap-ms: "${values['gap-ms']}" is not a number of ms, 0 or more`);
const SLOTS = 4;
const LANE = 'first';
const BARE = 'bare-first';
/** The completion poll; a finer poll would add load to the Redis and the process being measured. */
const POLL_MS = 5;
const RUN_TIMEOUT_MS = 120_000;
const TARGET_P50 = 1.5;
const TARGET_P99 = 2;

/** The wall clock in ms with µs precision, the clock `$EPOCHREALTIME` reads. */
const wallMs = () => performance.timeOrigin + performance.now();

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-first-'));
chmodSync(dir, 0o777);
const stampFile = join(dir, 'stamps');
writeFileSync(stampFile, '');
chmodSync(stampFile, 0o666);
const agent = join(dir, 'agent.sh');
writeFileSync(
  agent,
  `printf '%s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" >> ${stampFile}\n${WORK_MS > 0 ? `read -rt ${(WORK_MS / 1000).toFixed(3)} <> <(:) || true\n` : ''}exit 0\n`,
);
chmodSync(agent, 0o755);
const conn = new Redis(redis.url, { maxRetriesPerRequest: null });

/** Every stamp so far, by card id (the agent's first act). */
function readStamps(): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of readFileSync(stampFile, 'utf8').split('\n')) {
    const [id, at] = line.split(' ');
    if (id && at) out.set(id, Number(at) * 1000);
  }
  return out;
}

/** Waits until every job of `ids` is in `queue`'s completed set (read by score since the start). */
async function untilCompleted(queue: string, ids: readonly string[], since: number): Promise<void> {
  const pending = new Set(ids);
  let from = since - 1_000;
  await waitFor(
    `${pending.size} more completed on ${queue}`,
    async () => {
      const fresh = await conn.zrangebyscore(`${QUEUE_PREFIX}:${queue}:completed`, from, '+inf', 'WITHSCORES');
      for (let i = 0; i < fresh.length; i += 2) {
        pending.delete(fresh[i]!);
        from = Math.max(from, Number(fresh[i + 1]));
      }
      return pending.size === 0 || undefined;
    },
    { intervalMs: POLL_MS, timeoutMs: RUN_TIMEOUT_MS },
  );
}

function startBareWorker(): Promise<BareWorker> {
  return startBareWorkerProcess(redis.url, BARE, QUEUE_PREFIX, SLOTS, ['bash', agent]);
}

type Side = 'lanes' | 'other' | 'bare';
const samples: Record<'idle' | 'backlog', Record<Side, number[]>> = { idle: { lanes: [], other: [], bare: [] }, backlog: { lanes: [], other: [], bare: [] } };
const roundRatios: Array<{ p50: number; p99: number }> = [];
/** The box's CPU per card in each backlog round, by side (ms): the backlog is CPU-bound on a small box, so its ratio follows this one. */
const cpuPerCard: Record<Side, number[]> = { lanes: [], other: [], bare: [] };
const OTHER = values.other;
const LANE_OTHER = 'first-other';

/** What was started, stopped at the end in reverse order whatever failed. */
const started: Array<() => Promise<void>> = [];
try {
  const bareQueue = LANES_ONLY ? undefined : new Queue(BARE, { connection: conn, prefix: QUEUE_PREFIX });
  if (bareQueue) started.push(() => bareQueue.close());
  const bare = LANES_ONLY ? undefined : await startBareWorker();
  if (bare) started.push(() => bare.close());
  const lanes = [{ name: LANE, slots: SLOTS, agent: ['bash', agent] }];
  const heartbeatIntervalMs = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS;
  const sandboxDir = join(dir, 'stack');
  const httpAgent = new Agent({ keepAlive: true });
  started.push(async () => httpAgent.destroy());
  /** The stack and how to POST to it: in a process of its own over node:http (the default), or in this one over fetch. */
  const viaHttp = (c: { url?: string; stop(): Promise<void> }) => ({ post: (body: unknown) => postJson(httpAgent, c.url!, '/v1/cards', body), stop: () => c.stop() });
  const otherStack = OTHER
    ? viaHttp(
        await startStackProcess(
          {
            redisUrl: redis.url,
            lanes: [{ ...lanes[0]!, name: LANE_OTHER }],
            parts: { api: true, worker: true, supervisor: true },
            provider: 'local',
            heartbeatIntervalMs,
            sandboxDir: join(dir, 'other'),
          },
          OTHER,
        ),
      )
    : undefined;
  if (otherStack) started.push(() => otherStack.stop());
  const stack = STACK_SHARED
    ? await startTestStack(redis.url, lanes, { sandboxDir, heartbeatIntervalMs }).then((t) => ({
        post: (body: unknown) => t.api.request('POST', '/v1/cards', body),
        stop: () => t.stop(),
      }))
    : await startStackProcess({ redisUrl: redis.url, lanes, parts: { api: true, worker: true, supervisor: true }, provider: 'local', heartbeatIntervalMs, sandboxDir }).then(
        (c) => ({
          post: (body: unknown) => postJson(httpAgent, c.url!, '/v1/cards', body),
          stop: () => c.stop(),
        }),
      );
  started.push(() => stack.stop());
  let n = 0;
  /** Sends `count` cards on one side in one request (one card: a single POST / `Queue.add`); answers each card's send time. */
  const send = async (side: Side, count: number): Promise<Map<string, number>> => {
    const ids = Array.from({ length: count }, () => `${side}-${n++}`);
    const t0 = wallMs();
    if (side !== 'bare') {
      const lane = side === 'lanes' ? LANE : LANE_OTHER;
      const body = count === 1 ? { id: ids[0], lane, title: 'first instruction' } : { cards: ids.map((id) => ({ id, lane, title: 'first instruction' })) };
      const res = await (side === 'lanes' ? stack : otherStack!).post(body);
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    } else if (count === 1) {
      await bareQueue!.add('card', { title: 'first instruction' }, { jobId: ids[0] });
    } else {
      await bareQueue!.addBulk(ids.map((id) => ({ name: 'card', data: { title: 'first instruction' }, opts: { jobId: id } })));
    }
    return new Map(ids.map((id) => [id, t0]));
  };
  /** One batch on one side, to completion; answers each card's time to its first instruction, in ms. */
  const batch = async (side: Side, count: number): Promise<number[]> => {
    const since = Date.now();
    const sent = await send(side, count);
    await untilCompleted(side === 'bare' ? BARE : queueName(side === 'lanes' ? LANE : LANE_OTHER), [...sent.keys()], since);
    const stamps = readStamps();
    return [...sent].map(([id, t0]) => {
      const at = stamps.get(id);
      if (at === undefined) throw new Error(`no stamp for ${id}`);
      return at - t0;
    });
  };
  const sides: Side[] = [...(['lanes'] as const), ...(OTHER ? (['other'] as const) : []), ...(LANES_ONLY ? [] : (['bare'] as const))];
  try {
    // Warm-up, untimed: JIT, live sandboxes, the bash binary in the page cache.
    for (const side of sides) {
      await batch(side, WARMUP);
      for (let i = 0; i < 10; i++) await batch(side, 1);
    }
    for (let i = 0; i < IDLE; i++) {
      const order = [...sides.slice(i % sides.length), ...sides.slice(0, i % sides.length)];
      for (const side of order) {
        // The inter-arrival time of the workload (what is measured), not a wait for a condition.
        if (GAP_MS > 0) await new Promise((resolve) => setTimeout(resolve, GAP_MS));
        samples.idle[side].push(...(await batch(side, 1)));
      }
    }
    console.error(`idle: ${IDLE} cards per side`);
    for (let r = 0; r < ROUNDS; r++) {
      const order = [...sides.slice(r % sides.length), ...sides.slice(0, r % sides.length)];
      const round: Partial<Record<Side, number[]>> = {};
      for (const side of order) {
        const cpu0 = boxCpuMs().busy;
        round[side] = await batch(side, BACKLOG);
        cpuPerCard[side].push((boxCpuMs().busy - cpu0) / BACKLOG);
        samples.backlog[side].push(...round[side]);
      }
      if (round.bare) roundRatios.push({ p50: pct(round.lanes!, 50) / pct(round.bare, 50), p99: pct(round.lanes!, 99) / pct(round.bare, 99) });
      console.error(`backlog round ${r + 1}/${ROUNDS}: lanes p50 ${pct(round.lanes!, 50).toFixed(1)} ms, bare p50 ${pct(round.bare ?? [], 50).toFixed(1)} ms`);
    }
  } finally {
    for (const stop of started.splice(0).reverse()) await stop();
  }

  const load = loadavg().map((x) => Number(x.toFixed(2)));
  const result: Record<string, unknown> = {
    bench: 'first-instruction',
    slots: SLOTS,
    idleCards: IDLE,
    idleGapMs: GAP_MS,
    backlog: BACKLOG,
    rounds: ROUNDS,
    workMs: WORK_MS,
    stackProcess: values['stack-process'],
    loadAverage: load,
  };
  console.log(
    `\nfirst-instruction benchmark (local provider, ${SLOTS} slots, the stack in ${STACK_SHARED ? "the client's process" : 'a process of its own'}; agent: bash, stamp first, then ${WORK_MS} ms; load average ${load.join(' ')})\n`,
  );
  console.log('| case | lanes p50 / p99 | bare p50 / p99 | ratio p50 / p99 | target |');
  console.log('|---|---|---|---|---|');
  let met = true;
  for (const kind of ['idle', 'backlog'] as const) {
    const l = samples[kind].lanes;
    const b = samples[kind].bare;
    const r50 = pct(l, 50) / pct(b, 50);
    const r99 = pct(l, 99) / pct(b, 99);
    const ok = r50 <= TARGET_P50 && r99 <= TARGET_P99;
    met &&= ok;
    Object.assign(result, {
      [`${kind}LanesP50Ms`]: Number(pct(l, 50).toFixed(2)),
      [`${kind}LanesP99Ms`]: Number(pct(l, 99).toFixed(2)),
      [`${kind}BareP50Ms`]: Number(pct(b, 50).toFixed(2)),
      [`${kind}BareP99Ms`]: Number(pct(b, 99).toFixed(2)),
      [`${kind}RatioP50`]: Number(r50.toFixed(3)),
      [`${kind}RatioP99`]: Number(r99.toFixed(3)),
    });
    const label =
      kind === 'idle'
        ? `idle, one card at a time${GAP_MS > 0 ? `, ${GAP_MS} ms apart` : ''} (n = ${l.length} per side)`
        : `every slot busy, backlog of ${BACKLOG} (${ROUNDS} rounds, n = ${l.length} per side)`;
    console.log(
      `| ${label} | ${pct(l, 50).toFixed(1)} / ${pct(l, 99).toFixed(1)} ms | ${pct(b, 50).toFixed(1)} / ${pct(b, 99).toFixed(1)} ms | ${r50.toFixed(2)}× / ${r99.toFixed(2)}× | p50 ≤ ${TARGET_P50}×, p99 ≤ ${TARGET_P99}× ${ok ? '✔' : '✘'} |`,
    );
    const o = samples[kind].other;
    if (o.length > 0) {
      const o50 = pct(o, 50) / pct(b, 50);
      const o99 = pct(o, 99) / pct(b, 99);
      Object.assign(result, {
        [`${kind}OtherP50Ms`]: Number(pct(o, 50).toFixed(2)),
        [`${kind}OtherP99Ms`]: Number(pct(o, 99).toFixed(2)),
        [`${kind}OtherRatioP50`]: Number(o50.toFixed(3)),
        [`${kind}OtherRatioP99`]: Number(o99.toFixed(3)),
      });
      console.log(
        `| the same, the other checkout (${OTHER}) | ${pct(o, 50).toFixed(1)} / ${pct(o, 99).toFixed(1)} ms | ${pct(b, 50).toFixed(1)} / ${pct(b, 99).toFixed(1)} ms | ${o50.toFixed(2)}× / ${o99.toFixed(2)}× | |`,
      );
      console.log(`| the same, this checkout / the other | | | ${(pct(l, 50) / pct(o, 50)).toFixed(2)}× / ${(pct(l, 99) / pct(o, 99)).toFixed(2)}× | |`);
    }
  }
  if (cpuPerCard.lanes.length > 0) {
    const c = (side: Side) => `${median(cpuPerCard[side]).toFixed(2)} ms`;
    const ratio = cpuPerCard.bare.length > 0 ? `; lanes / bare ${(median(cpuPerCard.lanes) / median(cpuPerCard.bare)).toFixed(2)}×` : '';
    console.log(
      `\nbacklog, the box's CPU per card (every process: stack or bare worker, sandboxes, agents, Redis, this client; median of rounds): lanes ${c('lanes')}${OTHER ? `, the other checkout ${c('other')}` : ''}${cpuPerCard.bare.length > 0 ? `, bare ${c('bare')}` : ''}${ratio}`,
    );
    result.backlogCpuPerCardMs = Object.fromEntries(
      (Object.keys(cpuPerCard) as Side[]).filter((s) => cpuPerCard[s].length > 0).map((s) => [s, Number(median(cpuPerCard[s]).toFixed(3))]),
    );
  }
  if (roundRatios.length > 0) {
    console.log(`\nbacklog, per round (lanes / bare): ${roundRatios.map((r, i) => `${i + 1}: p50 ${r.p50.toFixed(2)}×, p99 ${r.p99.toFixed(2)}×`).join('; ')}`);
    result.backlogRoundRatiosP50 = roundRatios.map((r) => Number(r.p50.toFixed(3)));
    result.backlogRoundRatiosP99 = roundRatios.map((r) => Number(r.p99.toFixed(3)));
  }
  result.targetsMet = met;
  console.log(`BENCH_JSON ${JSON.stringify(result)}`);
} finally {
  for (const stop of started.splice(0).reverse()) await stop().catch((err: unknown) => console.error(`cleanup: ${String(err)}`));
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
