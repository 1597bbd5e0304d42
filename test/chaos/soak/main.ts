/**
 * `npm run chaos -- --cards N --minutes M --seed S`: the in-repo chaos soak (issue 11).
 *
 * The API, the workers and the supervisor run as separate `lanes` processes over a redis-server
 * with AOF that the soak owns; workers get their own network namespaces where the machine allows.
 * A seeded schedule kills sandboxes, workers and Redis, drains a worker, partitions one, opens a
 * window of create failures and cancels cards. With `--failovers N` the Redis is a Sentinel group
 * instead (a primary, a replica and three sentinels, see redis-group.ts), every stack process finds
 * the primary through the sentinels, and each failover kill -9s the primary: the replica is
 * promoted, the old primary comes back as a replica of it, and what the failover lost is read from
 * Redis before the kill and after the promotion (failover.ts); the cards it lost are posted again,
 * as a board does. A Redis kill under Sentinel restarts the primary from its AOF within the
 * sentinels' down-after, so it stays a restart (args.ts, `downAfterMsOf`). The agent keeps its own ledger of every run, and at
 * the end the ledger and the soak's own record of what it did are reconciled with the board's view.
 * A watcher samples the provider's own sandboxes beside the run (sandbox-watch.ts), so a false reap is
 * also judged from there: a sandbox that vanished while its owner was alive and connected.
 * With --keyed-share and --supersede-share some cards carry a concurrencyKey (the lane gets
 * maxRunningPerKey) or come as a few cards per supersedeKey in a row (schedule.ts `assignKeys`), and
 * the verdict judges both from the ledger and the cards' ends (keys.ts).
 * Exit status 1 when any gate of the verdict fails (see `failuresOf` in reconcile.ts: lost, concurrent,
 * terminal twice, false reaps, and everything else the soak measures).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { isTerminalCardState, type CardRecord } from '@lanes/contracts';
import { parseSoakArgs, resolveCounts, SoakHelpRequested, SoakUsageError, USAGE, type SoakArgs } from './args.js';
import { soakApi, type SoakApi } from './api.js';
import { FaultRunner } from './faults.js';
import { readLedger } from './ledger.js';
import { readLogFacts } from './logs.js';
import { readQueueEnds, type QueueEnd } from './queue-view.js';
import { isSameProcess, pidsWithEnv } from './proc.js';
import { reconcile, type ReconcileInput, type SoakResult } from './reconcile.js';
import { markdownReport } from './report.js';
import { startSandboxWatch } from './sandbox-watch.js';
import { planSoak, type PlannedCard, type PlannedFault } from './schedule.js';
import { LANE, startJanitor, startTopology, type Janitor, type Topology } from './topology.js';

/** Cards are sent in batches of at most this many, every tick. */
const ENQUEUE_BATCH = 100;
const TICK_MS = 250;
/** Progress of the settle phase is checked this often. */
const SETTLE_POLL_MS = 2_000;
/** Card reads in flight at once: enough to read 2,000 cards quickly without starving the API. */
const READ_CONCURRENCY = 16;
/** A run still going when the cards settled ends within its work time; this covers a loaded machine. */
const AGENT_DRAIN_SLACK_MS = 10_000;
/** Cards a failover lost are posted again for this long (the API may answer 503 a while longer). */
const REPOST_WINDOW_MS = 60_000;

const started = Date.now();
const log = (s: string) => process.stderr.write(`[soak +${((Date.now() - started) / 1000).toFixed(1)}s] ${s}\n`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!);
      }
    }),
  );
  return out;
}

async function readCard(api: SoakApi, id: string): Promise<CardRecord | undefined> {
  for (let i = 0; i < 3; i++) {
    try {
      return await api.card(id);
    } catch {
      await sleep(200);
    }
  }
  return undefined;
}

async function runSoak(args: SoakArgs, t: Topology): Promise<SoakResult> {
  const counts = resolveCounts(args);
  const plan = planSoak(args, counts);
  log(`plan: ${plan.cards.length} cards over ${(plan.runMs * 0.8) / 1000} s; faults ${JSON.stringify(counts)}`);
  const api = soakApi(t.apiUrl);
  const enqueued: string[] = [];
  const payload = (c: PlannedCard) => ({
    id: c.id,
    lane: LANE,
    title: `soak card ${c.id}`,
    metadata: { workMs: c.workMs },
    ...(c.concurrencyKey ? { concurrencyKey: c.concurrencyKey } : {}),
    ...(c.supersedeKey ? { supersedeKey: c.supersedeKey } : {}),
    ...(c.supersede ? { supersede: c.supersede } : {}),
  });
  /** When the API's answer to each card's first accepted POST came back (a superseding card's cancel is done by then). */
  const postedAtMs = new Map<string, number>();
  const byId = new Map(plan.cards.map((c) => [c.id, c]));
  // A board's remedy for a card a failover lost: post it again (an existing id is answered 200, a missing one created).
  const repost = async (ids: readonly string[]) => {
    const deadline = Date.now() + REPOST_WINDOW_MS;
    while (Date.now() < deadline) {
      let status = 0;
      try {
        status = await api.enqueue(ids.map((id) => payload(byId.get(id)!)));
      } catch {
        status = -1;
      }
      if (status === 200 || status === 202) return true;
      await sleep(TICK_MS);
    }
    return false;
  };
  const faults = new FaultRunner({ topology: t, api, args, enqueued: () => enqueued, repost, log });
  // The provider's own view of every sandbox, sampled beside the run, so a sandbox that vanished
  // with its owner alive is seen whatever lanes logged (or did not log) about reaping it.
  const watch = startSandboxWatch(t.sandboxDir);
  const t0 = Date.now();
  const at = (offsetMs: number) => sleep(Math.max(0, t0 + offsetMs - Date.now()));

  const enqueue = async () => {
    let i = 0;
    while (i < plan.cards.length) {
      const due = plan.cards.slice(i, i + ENQUEUE_BATCH).filter((c) => c.atMs <= Date.now() - t0);
      if (due.length === 0) {
        await sleep(TICK_MS);
        continue;
      }
      let status = 0;
      try {
        status = await api.enqueue(due.map(payload));
      } catch {
        status = -1;
      }
      // 503 while Redis is away: the board retries, as a board should.
      if (status === 200 || status === 202) {
        const answeredAtMs = Date.now();
        enqueued.push(...due.map((c) => c.id));
        for (const c of due) postedAtMs.set(c.id, answeredAtMs);
        i += due.length;
      } else await sleep(TICK_MS);
    }
    log(`all ${enqueued.length} cards enqueued`);
  };
  const fleet = plan.faults.filter((f) => f.kind !== 'sandbox-kill' && f.kind !== 'cancel');
  const runFleet = async () => {
    // One at a time: a fault that runs long delays the next rather than overlapping it.
    // Each waits for the fleet to be whole again (Redis back, workers started) and then for a
    // lock's length, so one fault's recovery is not confused with the next one's damage.
    for (const f of fleet) {
      await at(f.atMs);
      await faults.run(f);
      await t.settled();
      await sleep(args.lockMs);
    }
  };
  const runOne = async (f: PlannedFault) => {
    await at(f.atMs);
    await faults.run(f);
  };
  await Promise.all([enqueue(), runFleet(), ...plan.faults.filter((f) => !fleet.includes(f)).map(runOne)]);
  await at(plan.runMs);

  // Settle: wait for every card to reach a terminal state, up to the deadline.
  log(`settling (up to ${args.settleSeconds} s)`);
  const pending = new Set(plan.cards.map((c) => c.id));
  const settleBy = Date.now() + args.settleSeconds * 1000;
  while (pending.size > 0 && Date.now() < settleBy) {
    const ids = [...pending];
    const cards = await mapLimit(ids, READ_CONCURRENCY, (id) => readCard(api, id));
    ids.forEach((id, i) => {
      const c = cards[i];
      if (c && isTerminalCardState(c.state)) pending.delete(id);
    });
    if (pending.size > 0) await sleep(SETTLE_POLL_MS);
  }
  log(pending.size ? `${pending.size} card(s) still not terminal at the deadline` : 'every card is terminal');
  // Runs in orphaned sandboxes may still be going: let them write their ends before reading the
  // ledger. Agents carry this run's ledger path in their environment.
  const agentsBy = Date.now() + args.workMaxMs + AGENT_DRAIN_SLACK_MS;
  while (pidsWithEnv('SOAK_LEDGER', t.ledgerPath).length > 0 && Date.now() < agentsBy) await sleep(TICK_MS);
  const sandboxSightings = watch.stop();

  const ids = plan.cards.map((c) => c.id);
  const final = await mapLimit(ids, READ_CONCURRENCY, (id) => readCard(api, id));
  const cards = new Map(ids.map((id, i) => [id, final[i]]));
  const ledger = readLedger(t.ledgerPath);
  if (ledger.unreadable) log(`ledger: ${ledger.unreadable} unreadable line(s) (a run killed mid-write)`);
  const logs = readLogFacts(t.logsDir);
  let queueEnds: Map<string, QueueEnd> | undefined;
  try {
    queueEnds = await readQueueEnds(`redis://127.0.0.1:${(await t.redis.primary()).port}`, LANE, ids);
  } catch (err) {
    log(`could not read the queue's view: ${(err as Error).message}`);
  }
  const killedLabels = new Set(faults.injected.filter((f) => f.kind === 'worker-kill').map((f) => f.target));
  const input: ReconcileInput = {
    cardIds: ids,
    enqueued: new Set(enqueued),
    cards,
    ledger: ledger.records,
    logs,
    workers: t.instances.map((w) => ({
      label: w.proc.label,
      ...(logs.workerIds.get(w.proc.label) ? { workerId: logs.workerIds.get(w.proc.label)! } : {}),
      startedAtMs: w.proc.startedAtMs,
      ...(w.proc.endedAtMs !== undefined ? { endedAtMs: w.proc.endedAtMs } : {}),
      partitions: w.partitions,
      killed: killedLabels.has(w.proc.label),
      ...(faults.stopped.has(w.proc.label) ? { stoppedAtMs: faults.stopped.get(w.proc.label)! } : {}),
    })),
    sandboxKills: faults.sandboxKills,
    injected: faults.injected,
    ...(queueEnds ? { queueEnds } : {}),
    cancels: faults.cancelled,
    // The plan has no card meant to fail: every failed card is the product's doing.
    intendedFailures: new Set(),
    sandboxSightings,
    ...(plan.cards.some((c) => c.concurrencyKey || c.supersedeKey)
      ? { keys: { plan: plan.cards, postedAtMs, ...(args.maxRunningPerKey !== undefined ? { maxRunningPerKey: args.maxRunningPerKey } : {}) } }
      : {}),
    ...(args.failovers > 0 ? { failover: { planned: counts.failovers, records: faults.failovers, redisKillsFailedOver: faults.redisKillsFailedOver, lockMs: args.lockMs } } : {}),
    unexpectedExits: [t.api, t.supervisor, ...t.instances.map((w) => w.proc)].filter((m) => m.endedAtMs !== undefined && !faults.stopped.has(m.label)).map((m) => m.label),
    // After the link is back, TCP resends only when its backoff timer fires, which after an outage
    // of X can be up to about X later; only then do the beats resume. So a reap up to an outage
    // plus a lock after the heal still counts as the partition's doing.
    partitionGraceMs: args.outageMs + args.lockMs,
  };
  // What the soak knows, next to the logs and the ledger, for a post-mortem with --keep.
  writeFileSync(
    join(t.dir, 'facts.json'),
    JSON.stringify(
      {
        args,
        plan,
        ...input,
        cards: Object.fromEntries(input.cards),
        queueEnds: queueEnds && Object.fromEntries(queueEnds),
        logs: { ...logs, workerIds: Object.fromEntries(logs.workerIds), deadSandboxes: [...logs.deadSandboxes] },
        enqueued: enqueued,
        keys: input.keys && { ...input.keys, postedAtMs: Object.fromEntries(input.keys.postedAtMs) },
      },
      null,
      1,
    ),
  );
  return reconcile(input);
}

/** What is left of this run after the janitor: namespaces, links, processes, the run directory. */
function leftovers(t: Topology, keep: boolean): string[] {
  const out: string[] = [];
  const ns = spawnSync('ip', ['netns', 'list'], { encoding: 'utf8' }).stdout ?? '';
  for (const line of ns.split('\n')) if (line.includes(`lanes-soak-${t.runId}`)) out.push(`netns ${line.split(' ')[0]}`);
  const links = spawnSync('ip', ['-o', 'link'], { encoding: 'utf8' }).stdout ?? '';
  for (const line of links.split('\n')) if (line.includes(`ls${t.runId}`)) out.push(`link ${line.split(':')[1]?.trim()}`);
  for (const m of [t.api, t.supervisor, ...t.instances.map((w) => w.proc), ...t.redis.processes()]) if (isSameProcess(m.pid, m.startTime)) out.push(`process ${m.label} ${m.pid}`);
  if (!keep && existsSync(t.dir)) out.push(`dir ${t.dir}`);
  return out;
}

async function main(): Promise<number> {
  let args: SoakArgs;
  try {
    args = parseSoakArgs(process.argv.slice(2));
  } catch (err) {
    if (err instanceof SoakHelpRequested) {
      process.stdout.write(`${USAGE}\n`);
      return 0;
    }
    if (err instanceof SoakUsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`soak: ${(err as Error).message}\n\n${USAGE}\n`);
      return 2;
    }
    throw err;
  }
  const janitor: Janitor = startJanitor();
  let topology: Topology | undefined;
  // Whatever ends the soak (Ctrl-C, a crash), the janitor removes what it made. Even a SIGKILL
  // of the soak ends the janitor's input, and it cleans up then.
  const abort = (why: string, code: number) => {
    log(`${why}: cleaning up`);
    void janitor.finish().then((done) => {
      log(`cleaned: ${done.length} item(s)`);
      process.exit(code);
    });
  };
  process.once('SIGINT', () => abort('interrupted', 130));
  process.once('SIGTERM', () => abort('terminated', 143));
  process.once('uncaughtException', (err) => abort(`crashed: ${err.stack ?? err.message}`, 1));
  process.once('unhandledRejection', (err) => abort(`crashed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`, 1));

  let result: SoakResult;
  try {
    topology = await startTopology(args, janitor, log);
    result = await runSoak(args, topology);
  } catch (err) {
    log(`soak failed: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
    const done = await janitor.finish();
    log(`cleaned: ${done.length} item(s)`);
    return 3;
  }
  const cleaned = await topology.teardown();
  const left = leftovers(topology, args.keep);
  log(`teardown: ${cleaned.length} item(s) removed; left behind: ${left.length ? left.join(', ') : 'nothing'}${args.keep ? ` (kept ${topology.dir})` : ''}`);
  const info = {
    runId: topology.runId,
    mode: topology.mode,
    redis: topology.redis.kind === 'sentinel' ? `Sentinel (primary, replica, 3 sentinels; down-after ${topology.redis.sentinel!.downAfterMs} ms)` : 'one redis-server',
    seed: args.seed,
    cards: args.cards,
    minutes: args.minutes,
    workers: args.workers,
    slots: args.slots,
    lockMs: args.lockMs,
    heartbeatMs: args.heartbeatMs,
    outageMs: args.outageMs,
    elapsedMs: Date.now() - started,
  };
  process.stdout.write(`${markdownReport(info, result)}\n`);
  if (args.json) process.stdout.write(`SOAK_JSON ${JSON.stringify({ ...info, ...result, leftBehind: left })}\n`);
  if (left.length) return 4;
  return result.failures.length ? 1 : 0;
}

process.exit(await main());
