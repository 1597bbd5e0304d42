import { Worker } from 'bullmq';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { defaults, type LaneConfig } from '@lanes/contracts';
import { KeyLimits, QUEUE_PREFIX, queueName, type CardStore, type CasStore, type EventLog, type FleetStore, type LaneQueues, type ReplicaAck } from '@lanes/queue';
import { bestEffort, type SandboxProvider } from '@lanes/sandbox';
import { selectRedrive, workerSlotRange, type RedriveTrigger } from '@lanes/supervision';
import { bullmqTelemetry } from '@lanes/tracing';
import { warnTo } from './best-effort.js';
import { wakeMainLoop } from './bullmq-main-loop.js';
import { LaneBreaker } from './lane-breaker.js';
import { Terminator } from './terminator.js';
import { assertLeaseFits } from './lease.js';
import { createProcessor, type StopReason } from './processor.js';
import { PublishThrottle } from './publish-throttle.js';
import type { RunLease } from './run-lease.js';
import { Slot } from './slot.js';
import { SlotPool } from './slot-pool.js';
import { SlotScaler } from './slot-scaler.js';

/** BullMQ's default lock: a crashed worker's cards are handed on within about twice this. */
export const DEFAULT_LOCK_DURATION_MS = 30_000;
/**
 * BullMQ's stalled check never fails a card. After Redis restarts from its AOF following an
 * outage longer than the lock, every active card's lock has expired (Redis keeps expiry as
 * absolute time), so each spends a stall; with a finite maxStalledCount, repeated outages would
 * fail healthy cards. The budget that ends a card whose worker truly crashes again and again is
 * ours instead: each takeover of a card left running counts the vanished run as a crash suspect,
 * unless its worker said it fenced itself (lost its lock alive), and past CRASHED_RUNS_BUDGET
 * suspects the card fails (see crash-budget.ts and the transition script).
 */
export const UNLIMITED_STALLS = Number.MAX_SAFE_INTEGER;

export interface LaneWorkerDeps {
  lane: LaneConfig;
  workerId: string;
  redis: Redis;
  store: CardStore;
  queues: LaneQueues;
  events: EventLog;
  fleet: FleetStore;
  cas: CasStore;
  provider: SandboxProvider;
  log: Logger;
  now: () => number;
  /** Monotonic clock for the run leases; `performance.now` in production. */
  monotonicNow?: () => number;
  newNonce: () => string;
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  filesBaseDir: string;
  /**
   * BullMQ lock, also used as the stalled-check interval: a crashed worker's cards are handed to
   * another worker within about twice this. Default: BullMQ's 30 s.
   */
  lockDurationMs?: number;
  /** See DEFAULT_CARD_PUBLISH_INTERVAL_MS. */
  cardPublishIntervalMs?: number;
  /** Where Redis has replicas (Sentinel): a run's claim and its ending wait for one (replica-ack.ts). */
  replicaAck?: ReplicaAck;
}

/** One lane in one process: its slots (following the queue), its breaker, and one BullMQ Worker with concurrency = slots. */
export class LaneWorker {
  readonly pool: SlotPool;
  readonly breaker: LaneBreaker;
  readonly terminator: Terminator;
  private readonly running = new Map<string, AbortController>();
  private readonly leases = new Map<string, RunLease>();
  private worker: Worker | undefined;
  private readonly scaler: SlotScaler;
  /** Slots scaled away whose sandboxes are being terminated. */
  private readonly retiring = new Set<Promise<void>>();
  private slotSeq = 0;
  /** Releases of each slot, coalesced with the next take: under short cards, one write per card instead of two. */
  private readonly cardChanges: PublishThrottle<Slot>;
  private stopping = false;
  /** The breaker tick and terminate retries of the last beat, while still in flight. */
  private upkeep: Promise<void> | undefined;

  constructor(private readonly deps: LaneWorkerDeps) {
    const { lane, log } = deps;
    assertLeaseFits(lane.name, this.lockDurationMs, lane.killGraceMs);
    this.terminator = new Terminator({ provider: deps.provider, log });
    this.breaker = new LaneBreaker({
      lane,
      cas: deps.cas,
      events: deps.events,
      log,
      now: deps.now,
      onClosed: () => void this.redrive({ type: 'breaker-closed', lane: lane.name }),
      // Half-open on its own schedule: an idle live slot runs the one probe now, not at the next beat.
      onHalfOpen: () => void this.checkIdleSlots(),
    });
    this.cardChanges = new PublishThrottle({
      intervalMs: deps.cardPublishIntervalMs ?? defaults.DEFAULT_CARD_PUBLISH_INTERVAL_MS,
      now: deps.now,
      run: (slot) => void this.publish(slot),
    });
    // A take goes out at once, before the card's move to running: a running card is always shown in
    // its slot. A release may wait; the next take or the interval's end carries it.
    this.pool = new SlotPool({
      onChange: (slot, change) => {
        if (change !== 'take') return this.cardChanges.changed(slot);
        this.cardChanges.now(slot);
        // The last free slot taken on a lane that may still grow here: the scaler looks at the queue now.
        const slots = this.pool.slots;
        if (!this.stopping && slots.length < workerSlotRange(lane).ceiling && slots.every((s) => s.cardId !== undefined)) this.scaler.demandRose();
      },
      grow: (reason) => this.addSlot(reason, true),
    });
    this.scaler = new SlotScaler({
      lane,
      workerId: deps.workerId,
      pool: this.pool,
      breaker: this.breaker,
      queues: deps.queues,
      fleet: deps.fleet,
      log,
      now: deps.now,
      addSlot: (reason) => void this.addSlot(reason),
      retireSlots: (ids, reason) => this.retireSlots(ids, reason),
    });
    // A worker boots at the bottom of its range and grows with the queue (a fixed lane: at `slots`).
    for (let i = 0; i < workerSlotRange(lane).floor; i++) this.pool.add(this.newSlot());
  }

  private newSlot(): Slot {
    const deps = this.deps;
    const { lane, log } = deps;
    const slotId = `${deps.workerId}-${lane.name}-${this.slotSeq++}`;
    return new Slot({
      lane,
      slotId,
      workerId: deps.workerId,
      provider: deps.provider,
      terminator: this.terminator,
      breaker: this.breaker,
      events: deps.events,
      log: log.child({ slot: slotId }),
      now: deps.now,
      newNonce: deps.newNonce,
      sleep: deps.sleep,
      filesBaseDir: deps.filesBaseDir,
      onChange: (slot) => void this.publish(slot),
      record: (record) => void bestEffort('record sandbox', () => deps.fleet.putSandbox(record), warnTo(log)),
      onLive: () => void this.redrive({ type: 'sandbox-live', lane: lane.name }),
    });
  }

  /** Scale-up: a new slot whose sandbox is created from the base image at once. */
  private addSlot(reason: string, forCard = false): Slot {
    const slot = this.newSlot();
    this.pool.add(slot);
    if (forCard) this.scaler.changed();
    if (this.worker) this.startSlot(slot);
    this.followSlotCount();
    void this.publish(slot);
    this.announce('slot.added', slot.id, reason);
    return slot;
  }

  /** Scale-down: takes the slots that are still idle out of the pool now, then terminates their sandboxes by id. */
  private retireSlots(slotIds: readonly string[], reason: string): boolean {
    const { fleet, lane, workerId, log } = this.deps;
    const slots = slotIds.map((id) => this.pool.detachIdle(id)).filter((s): s is Slot => s !== undefined);
    if (!slots.length) return false;
    this.followSlotCount();
    for (const slot of slots) {
      this.cardChanges.forget(slot);
      const retiring: Promise<void> = (async () => {
        const sandboxId = await slot.retire('slot removed: the queue no longer needs it').catch((err: unknown) => {
          log.warn({ err: String(err), slot: slot.id }, 'retire slot failed');
          return undefined;
        });
        await bestEffort('forget slot', () => fleet.removeSlot(lane.name, workerId, slot.id), warnTo(log));
        this.announce('slot.removed', slot.id, reason, sandboxId);
      })().finally(() => this.retiring.delete(retiring));
      this.retiring.add(retiring);
    }
    return true;
  }

  /** A removed slot's event names the sandbox it terminated. */
  private announce(type: 'slot.added' | 'slot.removed', slotId: string, reason: string, sandboxId?: string): void {
    const { events, lane, log, now } = this.deps;
    log.info({ event: type, slot: slotId, sandboxId, slots: this.pool.size, reason }, type);
    void events
      .append({ type, at: new Date(now()).toISOString(), lane: lane.name, slot: slotId, ...(sandboxId ? { sandboxId } : {}), data: { slots: this.pool.size, reason } })
      .catch(() => undefined);
  }

  /**
   * BullMQ's concurrency follows the slot count. Its main loop reads the setting only when it wakes
   * (a job settles or a blocking fetch returns), so a raise is followed by a wake-up: otherwise a
   * worker whose every slot runs a long card would not fetch for its new slots until one ends. The
   * wake touches a BullMQ internal, gated on its version (bullmq-main-loop.ts).
   */
  private followSlotCount(): void {
    const worker = this.worker;
    if (!worker) return;
    const before = worker.concurrency;
    worker.concurrency = Math.max(1, this.pool.size);
    if (worker.concurrency > before) wakeMainLoop(worker);
  }

  private startSlot(slot: Slot): void {
    void slot.ready().catch((err: unknown) => this.deps.log.error({ err, slot: slot.id }, 'slot start failed'));
  }

  /** Each slot creates its sandbox at start; the BullMQ worker starts taking cards at once. */
  start(): void {
    const { lane, redis, log } = this.deps;
    for (const slot of this.pool.slots) this.startSlot(slot);
    this.worker = new Worker(
      queueName(lane.name),
      createProcessor({
        lane,
        redis,
        store: this.deps.store,
        pool: this.pool,
        breaker: this.breaker,
        log,
        now: this.deps.now,
        monotonicNow: this.deps.monotonicNow ?? (() => performance.now()),
        newNonce: this.deps.newNonce,
        lockDurationMs: this.lockDurationMs,
        running: this.running,
        leases: this.leases,
        ...(this.deps.replicaAck ? { replicaAck: this.deps.replicaAck } : {}),
        // Every lane: a card may carry a supersede key on any lane, a concurrency key where the lane limits it.
        keyLimits: new KeyLimits(redis),
        jobOf: (id: string) => this.deps.queues.job(id, lane.name),
        events: this.deps.events,
      }),
      {
        connection: redis,
        prefix: QUEUE_PREFIX,
        concurrency: Math.max(1, this.pool.size),
        maxStalledCount: UNLIMITED_STALLS,
        lockDuration: this.lockDurationMs,
        stalledInterval: this.lockDurationMs,
        // BullMQ's own tracing (bullmq-otel): its `process` span continues the trace the job carries. {} with tracing off.
        ...bullmqTelemetry(),
      },
    );
    this.worker.on('error', (err) => log.error({ err }, 'bullmq worker error'));
    // Fires once Redis answers again after the lock was lost; the lease fences the run at once.
    this.worker.on('lockRenewalFailed', (jobIds: string[]) => {
      for (const id of jobIds) this.leases.get(id)?.lost('lock-renewal-failed');
    });
  }

  private get lockDurationMs(): number {
    return this.deps.lockDurationMs ?? DEFAULT_LOCK_DURATION_MS;
  }

  /** Stops a card this lane runs; false when it runs none by that id, or that run is already stopping. */
  stopCard(cardId: string, reason: Exclude<StopReason, 'fenced'>): boolean {
    const controller = this.running.get(cardId);
    if (!controller || controller.signal.aborted) return false;
    controller.abort(reason);
    return true;
  }

  /** The cards this lane runs now, stopping ones included. */
  runningCardIds(): string[] {
    return [...this.running.keys()];
  }

  /** Re-drives the lane's blocked cards the trigger frees, per the pure policy. */
  async redrive(trigger: RedriveTrigger): Promise<void> {
    const { store, queues, lane, log } = this.deps;
    await bestEffort(
      'redrive',
      async () => {
        const { ids } = await queues.redriveBlocked(lane.name, await store.blocked(lane.name), (cards) => selectRedrive(cards, trigger), 're-driven');
        for (const id of ids) log.info({ event: 'card.redriven', cardId: id, trigger: trigger.type }, 'card.redriven');
      },
      warnTo(log),
    );
  }

  /**
   * The lane's upkeep each beat: breaker tick, pending terminates, and per slot an idle probe, then
   * its planned renewal (recycle when old, release when idle above minSlots).
   * Each part is guarded on its own (at most one in flight per lane, one per slot), so a slot whose
   * poll hangs holds only its own probe: the other slots, the breaker and the terminator go on.
   */
  async checkIdleSlots(): Promise<void> {
    const upkeep = (this.upkeep ??= (async () => {
      // Reads the shared breaker (another worker may have opened it) and half-opens it when due.
      await bestEffort('breaker tick', () => this.breaker.tick(), warnTo(this.deps.log));
      await this.terminator.retryPending();
    })().finally(() => (this.upkeep = undefined)));
    // Then planned renewal: a slot at index minSlots or above (oldest first) may let its sandbox go.
    const probes = this.pool.slots.map((s, i) =>
      bestEffort(
        'idle probe',
        async () => {
          await s.probeIdle();
          await s.renewIdle(i >= this.deps.lane.minSlots);
        },
        warnTo(this.deps.log),
      ),
    );
    await Promise.all([upkeep, ...probes]);
  }

  /** One scaling tick (see SlotScaler); none once stopping. */
  async followDemand(): Promise<void> {
    if (this.stopping) return;
    await bestEffort('slot scaling', () => this.scaler.tick(), warnTo(this.deps.log));
  }

  async publish(slot: Slot): Promise<void> {
    // A retired slot stays out of `GET /v1/lanes`, even if a late change of it lands after.
    if (!this.pool.has(slot)) return;
    await bestEffort('publish slot', () => this.deps.fleet.putSlot(this.deps.lane.name, slot.status(this.deps.now())), warnTo(this.deps.log));
  }

  /** Graceful: running cards are handed back (no attempt spent), then sandboxes are terminated. */
  async stop(): Promise<void> {
    this.stopping = true;
    this.breaker.close();
    // Stop fetching first, then hand the running cards back; close() resolves once they are.
    const closing = this.worker?.close();
    for (const controller of this.running.values()) controller.abort('shutdown' satisfies StopReason);
    // A card still waiting for its slot's sandbox (backoff, breaker) is handed back now, not after the wait.
    for (const slot of this.pool.slots) slot.halt();
    await closing;
    // Nothing of this worker's slots may be written after they are removed below.
    this.cardChanges.close();
    await Promise.all([...this.pool.slots.map((s) => s.stop()), ...this.retiring]);
    await bestEffort('remove slots', () => this.deps.fleet.removeSlots(this.deps.lane.name, this.deps.workerId), warnTo(this.deps.log));
  }
}
