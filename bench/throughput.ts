/**
 * Card throughput and the Redis cost of one card, beside a bare BullMQ worker, in one run.
 *
 *   npx tsx --conditions=@lanes/source bench/throughput.ts [--cards N] [--rounds R] [--warmup W] [--rt-cards K]
 *
 * Targets (issue 10), each printed with its verdict: throughput ≥ 0.6× the bare worker (median of
 * the rounds' ratios); at most 12 Redis round trips per card; `/healthz` p99 ≤ 25 ms during the
 * lanes rounds (in process). The other rows explain those figures and have no target.
 *
 * 1. Throughput. Rounds of N trivial cards (`agent: ["true"]`) through the whole stack in this
 *    process (API, worker with 4 slots on local sandboxes, supervisor), posted in bulks of 100,
 *    timed from the first POST to the last job completed. Baseline: a bare BullMQ `Worker`
 *    (concurrency 4) that spawns `true` for each job, fed by `Queue.addBulk` of 100, on the same
 *    redis-server. Both sides are timed by the same poll of the queue's completed set. Both are up
 *    for the whole run; W cards each warm them first (untimed), then R rounds run one side after the
 *    other, the order alternating, so load drift hits both alike. The figure is the median of the
 *    rounds' ratios, printed with its min and max and every round.
 * 2. Redis commands per card. `MONITOR` on its own connection counts every command the stack sends
 *    while K cards go, one at a time, from POST to done; the background rate (heartbeats,
 *    supervisor ticks, blocking pops), counted over an idle window first, is subtracted. The bench's
 *    own polling connection is left out by its address. Commands run inside Lua scripts are counted
 *    apart: they cost Redis time but no round trip.
 * 3. Round trips per card, counted in this process (the stack runs here): a command sent on a
 *    connection that has no reply outstanding starts a round trip; commands sent while one is
 *    outstanding (a pipeline, MULTI, or calls made together) ride with it. Same window and
 *    background subtraction as 2.
 * 4. `/healthz` latency during the lanes rounds, probed every 20 ms by `fetch` from this process,
 *    where the stack runs (the figure as first measured); and from a process of its own with a
 *    connection per probe, as a kubelet or a load balancer probes (bench/support/health-probe.ts); and this
 *    process's event-loop delay over the same rounds, the part of either that is the server's own.
 *    The same prober also probes an idle node:http server in a process of its own, in turn with
 *    lanes (bench/probes/idle-healthz.ts): the box's own tail, measured at the same moments.
 */
import { fork, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { createHistogram, type RecordableHistogram } from 'node:perf_hooks';
import { parseArgs } from 'node:util';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { QUEUE_PREFIX, keys, queueName } from '@lanes/queue';
import { startRedis, startTestStack, waitFor } from '../test/harness/index.js';
import { cpuWaitBetween, cpuWaitFigures, readCpuWait, type CpuWaitReading } from './probes/cpu-wait.js';
import type { ProbeReply, ProbeRequest } from './support/health-probe.js';
import type { IdleHealthzReady } from './probes/idle-healthz.js';
import { startBareWorkerProcess, type BareWorker } from './support/bare-worker-process.js';
import { startMonitor } from './support/monitor.js';
import { median, percentile as pct } from './support/stats.js';

const { values } = parseArgs({
  options: {
    /** Cards per round and side. */
    cards: { type: 'string', default: '150' },
    rounds: { type: 'string', default: '21' },
    warmup: { type: 'string', default: '300' },
    'rt-cards': { type: 'string', default: '20' },
    /** `own`: the baseline worker runs in a process of its own (bench/support/bare-worker.ts); `shared`: in this one, beside the stack. */
    'bare-process': { type: 'string', default: 'own' },
    /** Only the lanes run, no baseline and no command count: for `node --cpu-prof` of the stack alone. */
    'lanes-only': { type: 'boolean', default: false },
  },
});
const LANES_ONLY = values['lanes-only'];
if (values['bare-process'] !== 'own' && values['bare-process'] !== 'shared') throw new Error('--bare-process is own or shared');
const BARE_SHARED = values['bare-process'] === 'shared';
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
/** Cards per side before the first round: JIT and sandboxes warm, not timed. */
const WARMUP = Number(values.warmup);
const RT_CARDS = Number(values['rt-cards']);
const SLOTS = 4;
const BULK = 100;
const LANE = 'bench';
/** The completion poll; a finer poll would add load to the Redis being measured. */
const POLL_MS = 10;
/** The stack's heartbeat: `lanes up`'s own (the test stack beats 4 times as often, and sweeps as often). */
const HEARTBEAT_MS = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS;
/** Whole heartbeat (and supervisor) periods, several of them, so the background rate is stable. */
const IDLE_WINDOW_MS = 4 * HEARTBEAT_MS;
const RUN_TIMEOUT_MS = 300_000;
/** A batch's jobs cannot finish before it starts; this margin covers clock reads a moment apart. */
const COMPLETED_LOOKBACK_MS = 1_000;
/** /healthz is asked this often during the timed run, as a load balancer would. */
const HEALTH_POLL_MS = 20;
const LOOP_DELAY_SAMPLE_MS = 5;

/** Records, until stopped, how late a timer set every LOOP_DELAY_SAMPLE_MS fires: the event loop's delay, in µs. */
function sampleLoopDelay(into: RecordableHistogram): () => void {
  let due = performance.now() + LOOP_DELAY_SAMPLE_MS;
  const tick = () => {
    const now = performance.now();
    into.record(Math.max(1, Math.round((now - due) * 1e3)));
    due = now + LOOP_DELAY_SAMPLE_MS;
    timer = setTimeout(tick, LOOP_DELAY_SAMPLE_MS);
  };
  let timer = setTimeout(tick, LOOP_DELAY_SAMPLE_MS);
  return () => clearTimeout(timer);
}

/** Round trips by the command that opened them, counted while `tripsOn`. */
let tripsOn = false;
let trips = new Map<string, number>();
type Sendable = { commandQueue: { length: number }; sendCommand: (command: { name: string }, stream?: unknown) => unknown };
const proto = Redis.prototype as unknown as Sendable;
const sendCommand = proto.sendCommand;
proto.sendCommand = function (this: Sendable & object, command, stream) {
  if (tripsOn && this !== (conn as unknown) && this.commandQueue.length === 0) trips.set(command.name, (trips.get(command.name) ?? 0) + 1);
  return sendCommand.call(this, command, stream);
};

/**
 * GET /healthz every HEALTH_POLL_MS from this process, one at a time, until stopped; answers each
 * request's latency. The stack runs here, so `fetch`'s own work waits on, and adds to, the event
 * loop it measures.
 */
function pollHealth(baseUrl: string): { stop: () => Promise<number[]> } {
  const latencies: number[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const t0 = performance.now();
      const res = await fetch(`${baseUrl}/healthz`);
      await res.arrayBuffer();
      latencies.push(performance.now() - t0);
      await new Promise((r) => setTimeout(r, HEALTH_POLL_MS));
    }
  })();
  return {
    stop: async () => {
      running = false;
      await loop;
      return latencies;
    },
  };
}

/** The baseline in its own process (bench/support/bare-worker.ts): the default. */
function ownBareWorker(url: string): Promise<BareWorker> {
  return startBareWorkerProcess(url, 'bare', QUEUE_PREFIX, SLOTS);
}

/** The baseline in the bench's own process, beside the stack (`--bare-process shared`: how the bench ran before). */
function sharedBareWorker(url: string): BareWorker {
  const connection = new Redis(url, { maxRetriesPerRequest: null });
  const worker = new Worker(
    'bare',
    () =>
      new Promise<void>((resolve, reject) => {
        const child = spawn('true', [], { stdio: 'ignore' });
        child.once('error', reject);
        child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`true exited ${code}`))));
      }),
    { connection, prefix: QUEUE_PREFIX, concurrency: SLOTS },
  );
  return {
    close: async () => {
      await worker.close();
      connection.disconnect();
    },
  };
}

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-bench-throughput-'));
const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
/**
 * Waits until every job of `ids` is completed. The completed set keeps only the newest 10,000 jobs
 * (lanes' retention), so a count of it stops growing in a long run: each poll reads only the jobs
 * finished since the last one (the set's score is the finish time) and strikes them off.
 */
async function untilCompleted(queue: string, ids: Iterable<string>): Promise<void> {
  const pending = new Set(ids);
  const key = `${QUEUE_PREFIX}:${queue}:completed`;
  // Jobs finished in the same millisecond as the last one read are read again: harmless.
  let since = Date.now() - COMPLETED_LOOKBACK_MS;
  await waitFor(
    `${pending.size} more completed on ${queue}`,
    async () => {
      const fresh = await conn.zrangebyscore(key, since, '+inf', 'WITHSCORES');
      for (let i = 0; i < fresh.length; i += 2) {
        pending.delete(fresh[i]!);
        since = Math.max(since, Number(fresh[i + 1]));
      }
      return pending.size === 0 || undefined;
    },
    { intervalMs: POLL_MS, timeoutMs: RUN_TIMEOUT_MS },
  );
}

const result: Record<string, unknown> = { cards: CARDS, rounds: ROUNDS, warmup: WARMUP, slots: SLOTS };
// The kubelet-style /healthz prober, in a process of its own (bench/support/health-probe.ts), forked with this
// process's execArgv so it runs under tsx as this one does; and the control it probes beside lanes,
// an idle node:http server in a process of its own (bench/probes/idle-healthz.ts).
const prober = fork(new URL('./support/health-probe.ts', import.meta.url).pathname, [], { stdio: 'inherit' });
const idleServer = fork(new URL('./probes/idle-healthz.ts', import.meta.url).pathname, [], { stdio: 'inherit' });
const idleUrl = await new Promise<string>((resolve) => idleServer.once('message', (m: IdleHealthzReady) => resolve(`http://127.0.0.1:${m.port}/healthz`)));
/**
 * Probes lanes' /healthz and the idle server's in turn from the prober's process until stopped, each
 * every HEALTH_POLL_MS; answers each one's latencies.
 */
function probeHealth(baseUrl: string): { stop: () => Promise<{ lanes: number[]; idle: number[] }> } {
  prober.send({ start: [`${baseUrl}/healthz`, idleUrl], intervalMs: HEALTH_POLL_MS / 2 } satisfies ProbeRequest);
  return {
    stop: () =>
      new Promise((resolve, reject) => {
        prober.once('message', (reply: ProbeReply) => ('error' in reply ? reject(new Error(reply.error)) : resolve({ lanes: reply.latenciesMs[0]!, idle: reply.latenciesMs[1]! })));
        prober.send({ stop: true } satisfies ProbeRequest);
      }),
  };
}
try {
  // --- bare baseline: BullMQ Worker, concurrency 4, spawning `true` per job ---
  const bareQueue = LANES_ONLY ? undefined : new Queue('bare', { connection: conn, prefix: QUEUE_PREFIX });
  const bareWorker = LANES_ONLY ? undefined : BARE_SHARED ? sharedBareWorker(redis.url) : await ownBareWorker(redis.url);
  let bareSent = 0;
  /** Feeds n jobs in bulks of BULK and answers the time until all are completed. */
  const bareBatch = async (n: number): Promise<number> => {
    const t0 = performance.now();
    const ids: string[] = [];
    for (let i = 0; i < n; i += BULK) {
      const count = Math.min(BULK, n - i);
      const from = bareSent;
      bareSent += count;
      const jobs = Array.from({ length: count }, (_, k) => ({ name: 'card', data: { title: 'trivial' }, opts: { jobId: `bare-${from + k}` } }));
      for (const job of jobs) ids.push(job.opts.jobId);
      await bareQueue!.addBulk(jobs);
    }
    await untilCompleted('bare', ids);
    return performance.now() - t0;
  };

  // --- lanes: the whole stack, 4 slots, agent `true` ---
  const t = await startTestStack(redis.url, [{ name: LANE, slots: SLOTS, agent: ['true'] }], {
    sandboxDir: join(dir, 'stack'),
    heartbeatIntervalMs: HEARTBEAT_MS,
  });
  const queue = queueName(LANE);
  let lanesSent = 0;
  /** Posts n cards in bulks of BULK and answers the time until all are completed. */
  const lanesBatch = async (n: number): Promise<number> => {
    const t0 = performance.now();
    const ids: string[] = [];
    for (let i = 0; i < n; i += BULK) {
      const count = Math.min(BULK, n - i);
      const from = lanesSent;
      lanesSent += count;
      const cards = Array.from({ length: count }, (_, k) => ({ id: `card-${from + k}`, lane: LANE, title: 'trivial' }));
      for (const card of cards) ids.push(card.id);
      const res = await t.api.request('POST', '/v1/cards', { cards });
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    }
    await untilCompleted(queue, ids);
    return performance.now() - t0;
  };
  const rounds: Array<{ lanesMs: number; bareMs: number; ratio: number; first: 'lanes' | 'bare' }> = [];
  let healthMs: number[] = [];
  let probedMs: number[] = [];
  let idleProbedMs: number[] = [];
  /** The event loop's delay in the lanes rounds, in µs. */
  const loopDelay = createHistogram();
  const delayMs = (us: number) => us / 1e3;
  /** This process's CPU (user + system, thread pool included) per card in each lanes round: the stack and the bench's client. */
  const lanesCpuMsPerCard: number[] = [];
  /** The stack's main thread waiting for a CPU, and the box's CPU pressure, in each lanes round. */
  const cpuWait: Array<CpuWaitReading & { wallMs: number }> = [];
  const perCard: { client: Map<string, number>; lua: Map<string, number>; trips: Map<string, number> } = { client: new Map(), lua: new Map(), trips: new Map() };
  try {
    // Warm-up, both sides, before any clock: every slot has a live sandbox and both code paths are JIT-warm.
    if (bareWorker) await bareBatch(WARMUP);
    await lanesBatch(WARMUP);
    // Interleaved rounds, the order alternating, so load drift and a slow moment hit both sides alike.
    for (let r = 0; r < ROUNDS; r++) {
      const first = r % 2 === 0 || !bareWorker ? 'lanes' : 'bare';
      const runLanes = async () => {
        const health = pollHealth(t.stack.url!);
        const probed = probeHealth(t.stack.url!);
        const stopSampling = sampleLoopDelay(loopDelay);
        const cpu0 = process.cpuUsage();
        const wait0 = readCpuWait();
        const ms = await lanesBatch(CARDS);
        const cpu = process.cpuUsage(cpu0);
        cpuWait.push({ ...cpuWaitBetween(wait0, readCpuWait()), wallMs: ms });
        lanesCpuMsPerCard.push((cpu.user + cpu.system) / 1000 / CARDS);
        stopSampling();
        healthMs = healthMs.concat(await health.stop());
        const seen = await probed.stop();
        probedMs = probedMs.concat(seen.lanes);
        idleProbedMs = idleProbedMs.concat(seen.idle);
        return ms;
      };
      let lanesMs: number;
      let bareMs = Number.NaN;
      if (first === 'lanes') {
        lanesMs = await runLanes();
        if (bareWorker) bareMs = await bareBatch(CARDS);
      } else {
        bareMs = await bareBatch(CARDS);
        lanesMs = await runLanes();
      }
      rounds.push({ lanesMs, bareMs, ratio: bareMs / lanesMs, first });
      console.error(
        `round ${r + 1}/${ROUNDS} (${first} first): lanes ${((CARDS / lanesMs) * 1000).toFixed(0)} cards/s, bare ${((CARDS / bareMs) * 1000).toFixed(0)} jobs/s, ratio ${(bareMs / lanesMs).toFixed(2)}`,
      );
    }
    await bareWorker?.close();
    await bareQueue?.close();
    const states = await Promise.all(Array.from({ length: lanesSent }, (_, i) => conn.hget(keys.card(`card-${i}`), 'state')));
    const notDone = states.filter((s) => s !== 'done').length;
    if (notDone > 0) throw new Error(`${notDone} cards not done`);

    if (!LANES_ONLY) {
      // --- Redis commands per card, by MONITOR ---
      const monitor = await startMonitor(redis.url);
      const own = `${conn.stream.localAddress}:${conn.stream.localPort}`;
      let counts = { client: new Map<string, number>(), lua: new Map<string, number>() };
      monitor.onCommand((name, source) => {
        if (source === own) return;
        const m = source === 'lua' ? counts.lua : counts.client;
        m.set(name, (m.get(name) ?? 0) + 1);
      });
      const idleT0 = performance.now();
      const idleCpu0 = process.cpuUsage();
      tripsOn = true;
      await new Promise((r) => setTimeout(r, IDLE_WINDOW_MS));
      const idleMs = performance.now() - idleT0;
      const idleCpu = process.cpuUsage(idleCpu0);
      // What the idle stack costs this process, which the bare rounds share.
      result.idleStackCpuPct = Number((((idleCpu.user + idleCpu.system) / 1000 / idleMs) * 100).toFixed(2));
      const idle = { ...counts, trips };
      counts = { client: new Map(), lua: new Map() };
      trips = new Map();
      const runT0 = performance.now();
      for (let i = 0; i < RT_CARDS; i++) {
        const res = await t.api.request('POST', '/v1/cards', { id: `rt-${i}`, lane: LANE, title: 'trivial' });
        if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
        await untilCompleted(queue, [`rt-${i}`]);
      }
      const runMs = performance.now() - runT0;
      tripsOn = false;
      const run = { ...counts, trips };
      monitor.close();
      for (const kind of ['client', 'lua', 'trips'] as const) {
        for (const [name, n] of run[kind]) {
          const net = (n - ((idle[kind].get(name) ?? 0) * runMs) / idleMs) / RT_CARDS;
          if (net >= 0.05) perCard[kind].set(name, net);
        }
      }
    }
  } finally {
    await t.stop();
  }

  const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
  const ratios = rounds.map((r) => r.ratio);
  const lanesRates = rounds.map((r) => (CARDS / r.lanesMs) * 1000);
  const bareRates = rounds.map((r) => (CARDS / r.bareMs) * 1000);
  const lanesRate = median(lanesRates);
  const bareRate = median(bareRates);
  const ratio = median(ratios);
  const minRatio = Math.min(...ratios);
  const maxRatio = Math.max(...ratios);
  const waits = cpuWaitFigures(cpuWait);
  const sorted = (m: Map<string, number>) => Object.fromEntries([...m].sort((a, b) => b[1] - a[1]).map(([k, v]) => [k, Number(v.toFixed(2))]));
  Object.assign(result, {
    lanesCardsPerS: Number(lanesRate.toFixed(1)),
    bareJobsPerS: Number(bareRate.toFixed(1)),
    ratio: Number(ratio.toFixed(3)),
    ratioMin: Number(minRatio.toFixed(3)),
    ratioMax: Number(maxRatio.toFixed(3)),
    roundRatios: ratios.map((x) => Number(x.toFixed(3))),
    roundLanesCardsPerS: lanesRates.map((x) => Number(x.toFixed(1))),
    roundBareJobsPerS: bareRates.map((x) => Number(x.toFixed(1))),
    lanesProcessCpuMsPerCard: Number(median(lanesCpuMsPerCard).toFixed(2)),
    loadAverage: loadavg().map((x) => Number(x.toFixed(2))),
    healthzP50Ms: Number(pct(healthMs, 50).toFixed(1)),
    healthzP99Ms: Number(pct(healthMs, 99).toFixed(1)),
    healthzN: healthMs.length,
    probedHealthzP50Ms: Number(pct(probedMs, 50).toFixed(1)),
    probedHealthzP99Ms: Number(pct(probedMs, 99).toFixed(1)),
    probedHealthzN: probedMs.length,
    idleServerHealthzP50Ms: Number(pct(idleProbedMs, 50).toFixed(1)),
    idleServerHealthzP99Ms: Number(pct(idleProbedMs, 99).toFixed(1)),
    idleServerHealthzN: idleProbedMs.length,
    eventLoopDelayP50Ms: Number(delayMs(loopDelay.percentile(50)).toFixed(1)),
    eventLoopDelayP99Ms: Number(delayMs(loopDelay.percentile(99)).toFixed(1)),
    eventLoopDelayMaxMs: Number(delayMs(loopDelay.max).toFixed(1)),
    stackThreadCpuWaitPct: waits.threadWaitPct,
    stackThreadCpuWaitPerSliceUs: waits.threadWaitPerSliceUs,
    boxCpuPressureSomePct: waits.boxSomePct,
    redisClientCommandsPerCard: Number(sum(perCard.client).toFixed(1)),
    redisLuaCommandsPerCard: Number(sum(perCard.lua).toFixed(1)),
    redisRoundTripsPerCard: Number(sum(perCard.trips).toFixed(1)),
    rtCards: RT_CARDS,
    clientCommands: sorted(perCard.client),
    luaCommands: sorted(perCard.lua),
    roundTripsByFirstCommand: sorted(perCard.trips),
  });

  console.log(
    `\nthroughput benchmark (local provider, ${SLOTS} slots, ${ROUNDS} interleaved rounds of ${CARDS} cards, agent \`true\`, load average ${loadavg()
      .map((x) => x.toFixed(2))
      .join(' ')})\n`,
  );
  console.log('| measurement | lanes | bare baseline | ratio | target |');
  console.log('|---|---|---|---|---|');
  console.log(
    `| trivial cards, ${SLOTS} slots, median of ${ROUNDS} rounds (ratio min–max) | ${lanesRate.toFixed(0)} cards/s | ${bareRate.toFixed(0)} jobs/s | ${ratio.toFixed(2)}× (${minRatio.toFixed(2)}–${maxRatio.toFixed(2)}) | ≥ 0.6× ${ratio >= 0.6 ? '✔' : '✘'} |`,
  );
  const p99 = pct(healthMs, 99);
  console.log(
    `| \`/healthz\` during the run (n=${healthMs.length}), p50 / p99 | ${pct(healthMs, 50).toFixed(1)} / ${p99.toFixed(1)} ms | | | p99 ≤ 25 ms ${p99 <= 25 ? '✔' : '✘'} |`,
  );
  console.log(
    `| the same, probed from a process of its own with a connection per probe (n=${probedMs.length}), p50 / p99; beside it, an idle server's (n=${idleProbedMs.length}) | ${pct(probedMs, 50).toFixed(1)} / ${pct(probedMs, 99).toFixed(1)} ms | ${pct(idleProbedMs, 50).toFixed(1)} / ${pct(idleProbedMs, 99).toFixed(1)} ms | p99 ${(pct(probedMs, 99) / pct(idleProbedMs, 99)).toFixed(2)}× | |`,
  );
  console.log(
    `| the stack's event-loop delay in the lanes rounds, p50 / p99 / max | ${delayMs(loopDelay.percentile(50)).toFixed(1)} / ${delayMs(loopDelay.percentile(99)).toFixed(1)} / ${delayMs(loopDelay.max).toFixed(1)} ms | | | |`,
  );
  console.log(
    `| the stack's main thread runnable but without a CPU (share of the lanes rounds; mean wait per timeslice) | ${result.stackThreadCpuWaitPct ?? '-'} %; ${result.stackThreadCpuWaitPerSliceUs ?? '-'} µs | | | |`,
  );
  console.log(`| the box: some task waiting for a CPU (PSI "some", share of the lanes rounds) | ${result.boxCpuPressureSomePct ?? '-'} % | | | |`);
  const tripsPerCard = sum(perCard.trips);
  console.log(`| Redis round trips per card, POST → done | ${tripsPerCard.toFixed(1)} | | | ≤ 12 ${tripsPerCard <= 12 ? '✔' : '✘'} |`);
  console.log(`| this process's CPU per card in the lanes rounds (median) | ${median(lanesCpuMsPerCard).toFixed(2)} ms | | | |`);
  console.log(`| this process's CPU while the stack idles (the bare rounds share it) | ${String(result.idleStackCpuPct ?? '-')} % | | | |`);
  console.log(`| Redis commands per card, sent by clients | ${sum(perCard.client).toFixed(1)} | | | |`);
  console.log(`| Redis commands per card, inside Lua scripts | ${sum(perCard.lua).toFixed(1)} | | | |`);
  console.log(
    `\nper round (lanes / bare, ratio): ${rounds.map((r, i) => `${i + 1}: ${lanesRates[i]!.toFixed(0)} / ${bareRates[i]!.toFixed(0)} = ${r.ratio.toFixed(2)}`).join('; ')}`,
  );
  console.log(`per card, client commands: ${JSON.stringify(sorted(perCard.client))}`);
  console.log(`per card, Lua commands: ${JSON.stringify(sorted(perCard.lua))}`);
  console.log(`per card, round trips by the command that opened them: ${JSON.stringify(sorted(perCard.trips))}`);
  console.log(`BENCH_JSON ${JSON.stringify({ bench: 'throughput', ...result })}`);
} finally {
  if (prober.connected) prober.disconnect();
  if (idleServer.connected) idleServer.disconnect();
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
