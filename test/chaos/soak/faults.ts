import type { SlotStatus } from '@lanes/contracts';
import type { SoakArgs } from './args.js';
import type { SoakApi } from './api.js';
import { envOf, isSameProcess, procStartTime } from './proc.js';
import { workerIdIn } from './logs.js';
import type { FaultKind, PlannedFault } from './schedule.js';
import { LANE, type Topology } from './topology.js';
import { failoverLoss, lostBytes, snapshotCards, type CardSnapshot, type FailoverRecord } from './failover.js';
import { ask, info } from './redis-group.js';

/** What the soak did, as it knows it: the ground truth the board's view is reconciled against. */
export interface InjectedFault {
  kind: FaultKind;
  /** Epoch ms when it began, and when it was over (a restart done, Redis back, the link up). */
  atMs: number;
  endMs: number;
  target?: string;
  /** Why nothing was done (no busy sandbox at the time, say). */
  skipped?: string;
  note?: string;
}

export interface SandboxKill {
  atMs: number;
  sandboxId: string;
  cardId: string;
  pid: number;
}

/**
 * A sandbox kill looks this long for a busy sandbox before it gives up: the fleet may be restarting,
 * or Redis away (6 s by default) so that the API cannot list the slots.
 */
const SANDBOX_PICK_WINDOW_MS = 20_000;
/** A cancel the API does not accept (the card ended meanwhile) is tried on another pick for this long. */
const CANCEL_PICK_WINDOW_MS = 10_000;
/** The next pick's offset: an irrational step, so retries walk the busy list instead of repeating a victim. */
const PICK_STEP = 0.618_034;
/** The cancels a fault tried before one was accepted, in short: how many, and the last. */
const tried = (answers: readonly string[]) => `${answers.length} not accepted, the last ${answers.at(-1)}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A promotion takes the sentinels' down-after and then an election and a promotion: this covers a loaded box. */
const PROMOTION_TIMEOUT_MS = 30_000;
/** The old primary, restarted as a replica, loads its AOF and full-syncs from the new one within this. */
const REJOIN_TIMEOUT_MS = 30_000;
const num = (v: string | undefined) => (v === undefined || v === '' || Number.isNaN(Number(v)) ? undefined : Number(v));

export interface FaultDeps {
  topology: Topology;
  api: SoakApi;
  args: SoakArgs;
  /** Card ids enqueued so far (cancels pick among them). */
  enqueued: () => readonly string[];
  /** Posts these cards again as the board first posted them (after a failover lost them); true once the API took them. */
  repost: (ids: readonly string[]) => Promise<boolean>;
  log: (s: string) => void;
}

export class FaultRunner {
  readonly injected: InjectedFault[] = [];
  readonly sandboxKills: SandboxKill[] = [];
  /** Each cancel sent: when, the API's answer (-1: none), and when that answer came back. */
  readonly cancelled: Array<{ cardId: string; atMs: number; status: number; answeredAtMs: number }> = [];
  /** Labels of the processes the soak itself stopped, and when it began to; any other exit is the product's doing. */
  readonly stopped = new Map<string, number>();
  /** Each failover: what it lost and what the soak did about it. */
  readonly failovers: FailoverRecord[] = [];
  /** Redis kills under Sentinel that the sentinels turned into a failover (the restart was demoted). */
  redisKillsFailedOver = 0;

  constructor(private readonly deps: FaultDeps) {}

  async run(f: PlannedFault): Promise<void> {
    const atMs = Date.now();
    const done = (extra: Partial<InjectedFault> = {}) => {
      const entry: InjectedFault = { kind: f.kind, atMs, endMs: Date.now(), ...extra };
      this.injected.push(entry);
      this.deps.log(
        `fault ${f.kind}${entry.target ? ` ${entry.target}` : ''}${entry.note ? `: ${entry.note}` : ''}${entry.skipped ? ` skipped: ${entry.skipped}` : ''} (${entry.endMs - entry.atMs} ms)`,
      );
    };
    const { topology: t, args } = this.deps;
    const workerIndex = f.worker ?? Math.floor(f.pick * args.workers);
    switch (f.kind) {
      case 'sandbox-kill': {
        const kill = await this.killBusySandbox(f.pick);
        return kill ? done({ target: `${kill.sandboxId} (card ${kill.cardId}, pid ${kill.pid})` }) : done({ skipped: 'no busy sandbox of ours was found' });
      }
      case 'cancel': {
        // A card that is running, so the cancel has a process group to kill; with none running (or
        // Redis away), one of the latest enqueued, which may still be queued. Slots are published
        // once a beat, so the card may have ended meanwhile (409): a cancel the API did not accept
        // did nothing, and the next pick is tried, for a while.
        const deadline = Date.now() + CANCEL_PICK_WINDOW_MS;
        const answers: string[] = [];
        for (let attempt = 0; Date.now() < deadline; attempt++) {
          const running = ((await this.busySlots()) ?? []).map((s) => s.cardId!);
          const ids = running.length > 0 ? running : this.deps.enqueued().slice(-2 * args.workers * args.slots);
          const id = ids[Math.floor(((f.pick + attempt * PICK_STEP) % 1) * ids.length)];
          if (id) {
            const { status } = await this.cancel(id, atMs);
            if (status === 202) return done({ target: id, note: `HTTP 202${answers.length ? ` (after ${tried(answers)})` : ''}` });
            answers.push(`${id} HTTP ${status}`);
          }
          await sleep(250);
        }
        return done({ skipped: answers.length ? `no cancel accepted (${tried(answers)})` : 'no card enqueued yet' });
      }
      case 'worker-kill': {
        const w = t.current(workerIndex);
        this.stopped.set(w.proc.label, Date.now());
        await t.stopWorker(workerIndex, 'SIGKILL');
        await sleep(args.restartDelayMs);
        t.startWorker(workerIndex);
        return done({ target: w.proc.label });
      }
      case 'worker-drain': {
        const w = t.current(workerIndex);
        this.stopped.set(w.proc.label, Date.now());
        const { exited } = await t.stopWorker(workerIndex, 'SIGTERM');
        t.startWorker(workerIndex);
        return done({ target: w.proc.label, ...(exited ? {} : { note: 'did not exit after SIGTERM in time; killed' }) });
      }
      case 'create-failures': {
        // An honest create failure: the worker restarts with the faulty provider around its local
        // one (lane `faults.createFailures`), so its next creates really fail as a provider would.
        const w = t.current(workerIndex);
        this.stopped.set(w.proc.label, Date.now());
        const { exited } = await t.stopWorker(workerIndex, 'SIGTERM');
        const next = t.startWorker(workerIndex, true);
        return done({ target: `${w.proc.label} → ${next.proc.label}`, note: `${args.createFailures} failing creates${exited ? '' : '; drain timed out, killed'}` });
      }
      case 'redis-kill': {
        // Under Sentinel too: the primary is killed and restarted from its AOF on its port, as
        // primary, before the sentinels' down-after (checkSentinelArgs), so it is a restart that
        // loses nothing, not a failover. Should the sentinels have promoted the replica anyway, the
        // restarted node would be demoted: that is counted, and fails the run (it did not test what it says).
        const node = await t.redis.primary();
        await t.redis.kill(node);
        await sleep(args.outageMs);
        await t.redis.start(node);
        const note = `down ${Date.now() - atMs} ms`;
        if (t.redis.kind === 'sentinel') {
          await t.settled();
          const now = await t.redis.primary();
          if (now !== node) {
            this.redisKillsFailedOver += 1;
            return done({ target: `${node.label} :${node.port}`, note: `${note}; the sentinels failed over to ${now.label} meanwhile, so the restart was demoted` });
          }
          return done({ target: `${node.label} :${node.port} (primary)`, note: `${note}; still the primary after its restart` });
        }
        return done({ target: `${node.label} :${node.port}`, note });
      }
      case 'failover': {
        const f = await this.failover();
        if (typeof f === 'string') return done({ skipped: f });
        const lost = `${f.vanished.length} record(s) vanished, ${f.movesLost.length} card(s) lost moves, ${f.lostBytes ?? '?'} B of replication lost`;
        return done({
          atMs: f.atMs,
          target: `${f.oldPrimary} → ${f.newPrimary}`,
          note: `promoted after ${f.promotedAtMs - f.atMs} ms; ${lost}; ${f.reposted.length} card(s) re-posted; old primary ${f.oldPrimaryRejoined ? 'back as a replica' : 'NOT back as a replica'}`,
        });
      }
      case 'partition': {
        const w = t.current(workerIndex);
        t.partition(workerIndex, true);
        // A cancel the cut-off worker cannot hear, of a card it runs: the API still answers it.
        const cancelled = await this.cancelRunningOn(w.proc.label, atMs);
        await sleep(Math.max(0, atMs + args.outageMs - Date.now()));
        t.partition(workerIndex, false);
        const how = t.mode === 'netns' ? 'veth link down' : 'SIGSTOP (plain mode)';
        return done({ target: w.proc.label, note: cancelled ? `${how}; cancelled ${cancelled.cardId} on it: HTTP ${cancelled.status}` : how });
      }
    }
  }

  /**
   * kill -9 of the primary the sentinels name, after reading every enqueued card from it (and the
   * replication offsets); then the promotion, the cards read again from the new primary, the old
   * primary restarted as a replica of the new one (so a next failover has a target; it is never a
   * primary again unless promoted), and every accepted card the new primary lacks posted again, as
   * a board does. Answers why it did nothing instead, when it could not.
   */
  private async failover(): Promise<FailoverRecord | string> {
    const { topology: t } = this.deps;
    const sentinel = t.redis.sentinel;
    if (!sentinel) return 'the soak runs on one redis-server, not a Sentinel group';
    const old = await t.redis.primary();
    const replica = sentinel.nodes.find((n) => n !== old)!;
    const ids = [...this.deps.enqueued()];
    const [before, primaryInfo, replicaInfo] = await Promise.all([
      ask(old.port, (c) => snapshotCards(c, ids), 10_000),
      info(old.port, 'replication'),
      info(replica.port, 'replication'),
    ]);
    if (!before) return `could not read the cards from ${old.label} before the kill`;
    const primaryOffset = num(primaryInfo?.master_repl_offset);
    const replicaOffset = num(replicaInfo?.slave_repl_offset);
    const atMs = Date.now();
    await t.redis.kill(old);
    const promotionTimeoutMs = sentinel.downAfterMs + PROMOTION_TIMEOUT_MS;
    const promoted = await sentinel.waitForPromotion(old, promotionTimeoutMs);
    const promotedAtMs = Date.now();
    if (!promoted) {
      // No failover: the old primary comes back as it was, so the rest of the run has a Redis.
      await t.redis.start(old);
      return `no promotion within ${promotionTimeoutMs} ms; ${old.label} restarted as primary`;
    }
    const [after, promotedInfo] = await Promise.all([ask(promoted.port, (c) => snapshotCards(c, ids), 10_000), info(promoted.port, 'replication')]);
    const loss = after ? failoverLoss(before, after) : { vanished: [], movesLost: [] };
    await t.redis.start(old, promoted);
    const rejoined = await sentinel.waitForSync(old, REJOIN_TIMEOUT_MS);
    // Cards the API accepted since the snapshot are read now: any the new primary lacks was lost too.
    const later = this.deps.enqueued().filter((id) => !before.has(id));
    const laterNow = later.length ? await ask(promoted.port, (c) => snapshotCards(c, later), 10_000) : new Map<string, CardSnapshot>();
    if (!laterNow) this.deps.log(`failover: could not read the cards accepted since the snapshot from ${promoted.label}`);
    const missing = [...loss.vanished, ...later.filter((id) => laterNow !== undefined && laterNow.get(id) === undefined)];
    let repostAccepted = true;
    if (missing.length > 0) {
      await t.settled();
      repostAccepted = await this.deps.repost(missing);
    }
    const lost = lostBytes(primaryOffset, num(promotedInfo?.second_repl_offset));
    const record: FailoverRecord = {
      atMs,
      promotedAtMs,
      endMs: Date.now(),
      oldPrimary: `${old.label} :${old.port}`,
      newPrimary: `${promoted.label} :${promoted.port}`,
      ...(primaryOffset !== undefined && replicaOffset !== undefined ? { lagBytesBeforeKill: primaryOffset - replicaOffset } : {}),
      ...(lost !== undefined ? { lostBytes: lost } : {}),
      cardsRead: ids.length,
      vanished: loss.vanished,
      movesLost: loss.movesLost,
      reposted: missing,
      repostAccepted,
      oldPrimaryRejoined: rejoined,
    };
    if (!after) this.deps.log(`failover: could not read the cards from ${promoted.label} after the promotion; losses unknown`);
    this.failovers.push(record);
    return record;
  }

  /** The lane's slots that hold a card, as last published; undefined when the API cannot say (Redis away). */
  private async busySlots(): Promise<SlotStatus[] | undefined> {
    try {
      return ((await this.deps.api.lanes())?.find((l) => l.name === LANE)?.slots ?? []).filter((s) => s.cardId);
    } catch {
      return undefined;
    }
  }

  /** Cancels a card through the API and records its answer (-1: none). */
  private async cancel(cardId: string, atMs: number): Promise<{ cardId: string; atMs: number; status: number; answeredAtMs: number }> {
    let status: number;
    try {
      status = await this.deps.api.cancel(cardId);
    } catch {
      status = -1;
    }
    const entry = { cardId, atMs, status, answeredAtMs: Date.now() };
    this.cancelled.push(entry);
    return entry;
  }

  /** Cancels a card that the worker instance `label` runs, as its last published slots say; none if it runs none. */
  private async cancelRunningOn(label: string, atMs: number): Promise<{ cardId: string; status: number } | undefined> {
    const workerId = workerIdIn(this.deps.topology.logsDir, label);
    const cardId = workerId ? (await this.busySlots())?.find((s) => s.worker === workerId)?.cardId : undefined;
    return cardId ? this.cancel(cardId, atMs) : undefined;
  }

  /** kill -9 of a sandbox that is running a card, if the pid really is one of ours (its env says so). */
  private async killBusySandbox(pick: number): Promise<SandboxKill | undefined> {
    const deadline = Date.now() + SANDBOX_PICK_WINDOW_MS;
    while (Date.now() < deadline) {
      const busy = ((await this.busySlots()) ?? []).filter(
        (s) =>
          s.sandbox?.state === 'live' &&
          s.sandbox.pid !== undefined &&
          envOf(s.sandbox.pid, 'LANES_SANDBOX_ID') === s.sandbox.id &&
          (envOf(s.sandbox.pid, 'LANES_SANDBOX_WORKDIR') ?? '').startsWith(`${this.deps.topology.sandboxDir}/`),
      );
      const slot = busy[Math.floor(pick * busy.length)];
      if (slot?.sandbox?.pid !== undefined) {
        const pid = slot.sandbox.pid;
        const start = procStartTime(pid);
        if (start !== undefined && isSameProcess(pid, start)) {
          process.kill(pid, 'SIGKILL');
          const kill = { atMs: Date.now(), sandboxId: slot.sandbox.id, cardId: slot.cardId!, pid };
          this.sandboxKills.push(kill);
          return kill;
        }
      }
      await sleep(250);
    }
    return undefined;
  }
}
