import type { Logger } from 'pino';
import {
  ConfigError,
  IllegalStateError,
  ProviderInvalidError,
  cardTimeoutMsOf,
  type LaneConfig,
  type ObservedExitCode,
  type SandboxRecord,
  type SandboxState,
  type SlotStatus,
} from '@lanes/contracts';
import type { EventLog } from '@lanes/queue';
import { runCanary } from '@lanes/runner';
import { bestEffort, syncFiles, type SandboxHandle, type SandboxProvider } from '@lanes/sandbox';
import { evaluateRespawn, evaluateSandboxRenewal, recordDeath, type CanaryReading, type DeathHistory, type SandboxRenewalDecision } from '@lanes/supervision';
import { warnTo } from './best-effort.js';
import type { LaneBreaker } from './lane-breaker.js';
import { SlotIdleProbe } from './slot-idle-probe.js';
import type { Terminator } from './terminator.js';
import { INITIAL_SLOT_STATE, nextSlotState, type DeadSandbox, type SlotEvent, type SlotSnapshot, type SlotStateName } from './slot-state.js';

export type SlotState = SlotStateName;

export type Readiness =
  | { kind: 'live'; handle: SandboxHandle }
  | { kind: 'wait'; retryAt: number; reason: string }
  /** The lane's config cannot make a sandbox (a missing secret or file, an image that fails to build): a person must fix it. */
  | { kind: 'misconfigured'; reason: string };

/** A failure no retry can fix: reported on the lane and the card, never fed to the breaker. */
function isConfigError(err: unknown): err is ProviderInvalidError | ConfigError {
  return err instanceof ProviderInvalidError || err instanceof ConfigError;
}

export interface SlotDeps {
  lane: LaneConfig;
  slotId: string;
  workerId: string;
  provider: SandboxProvider;
  /** Terminates by id until confirmed. */
  terminator: Terminator;
  breaker: LaneBreaker;
  events: EventLog;
  log: Logger;
  now: () => number;
  newNonce: () => string;
  /** Resolves after `ms`, or early when `signal` aborts (a stopping slot does not wait out its backoff). */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
  /** Relative `files[].from` paths resolve against this. */
  filesBaseDir: string;
  onChange: (slot: Slot) => void;
  /** Keeps the sandbox's record (fire-and-forget: recording never blocks or throws into recovery). */
  record: (record: SandboxRecord) => void;
  /** A sandbox passed its canary; `respawned` when it replaced a dead one. */
  onLive: (slot: Slot, respawned: boolean) => void;
}

type SpawnResult = Readiness | { kind: 'retry'; reason: string };

/** One lane worker slot. It owns exactly one sandbox at a time; a respawn replaces it. */
export class Slot {
  /** Everything the slot is, in one value that only `nextSlotState` changes. */
  private snapshot: SlotSnapshot = INITIAL_SLOT_STATE;
  private deaths: DeathHistory = { deaths: [] };
  private spawning: Promise<SpawnResult> | undefined;
  private readonly stopping = new AbortController();
  private readonly idle: SlotIdleProbe;
  /** When the current sandbox's create was asked for: its age, and what is left of its lifetime, count from here. */
  private sandboxCreatedAt = 0;
  /** Since when the slot has held no card. */
  private idleSince: number;
  /** The card the slot's sandbox ran last, whose directory it holds until the next card's reset removes it. */
  private lastCard: { sandboxId: string; cardId: string } | undefined;

  constructor(private readonly deps: SlotDeps) {
    this.idle = new SlotIdleProbe({ slot: this, breaker: deps.breaker, lane: deps.lane, newNonce: deps.newNonce, log: deps.log });
    this.idleSince = deps.now();
  }

  get id(): string {
    return this.deps.slotId;
  }

  get state(): SlotState {
    return this.snapshot.sandbox.state;
  }

  /** The live sandbox, if any. */
  get handle(): SandboxHandle | undefined {
    return this.snapshot.sandbox.state === 'live' ? this.snapshot.sandbox.handle : undefined;
  }

  get cardId(): string | undefined {
    return this.snapshot.cardId;
  }

  private get stopped(): boolean {
    return this.snapshot.sandbox.state === 'stopped';
  }

  private get dead(): DeadSandbox | undefined {
    const p = this.snapshot.sandbox;
    return p.state === 'dead' || p.state === 'respawning' || p.state === 'waiting-provider' ? p.dead : undefined;
  }

  /** Applies one event through the transition function; IllegalStateError if the state does not allow it. */
  private apply(event: SlotEvent, notify = true): void {
    this.snapshot = nextSlotState(this.snapshot, event);
    if (notify) this.deps.onChange(this);
  }

  /** The pool gives the slot a card; only the pool calls this. */
  take(cardId: string): void {
    this.apply({ type: 'take', cardId }, false);
  }

  release(): void {
    this.apply({ type: 'release' }, false);
    this.idleSince = this.deps.now();
  }

  get log(): Logger {
    return this.deps.log.child({ sandboxId: this.handle?.id });
  }

  /** Waits until the slot has a live sandbox, or says until when cards must wait for the provider. */
  async ready(): Promise<Readiness> {
    for (;;) {
      if (this.stopped) return { kind: 'wait', retryAt: this.deps.now(), reason: 'slot stopped' };
      if (this.handle) {
        const renewal = this.renewal({ moment: 'card-start', ageMs: this.deps.now() - this.sandboxCreatedAt, cardTimeoutMs: cardTimeoutMsOf(this.deps.lane) });
        if (renewal.action === 'keep') return { kind: 'live', handle: this.handle };
        await this.renew(renewal);
        continue;
      }
      this.spawning ??= this.spawn(this.dead !== undefined);
      const result = await this.spawning;
      this.spawning = undefined;
      if (result.kind !== 'retry') return result;
      await this.backOff();
    }
  }

  /**
   * The respawn plan, in one place: each death (a live sandbox found dead, a create or a preparation
   * that failed) is counted in the slot's history, and before the next create the slot waits out
   * the backoff that history calls for (evaluateRespawn), or until it is stopped.
   */
  private countDeath(): void {
    this.deaths = recordDeath(this.deaths, this.deps.now(), this.deps.lane.respawn);
  }

  private async backOff(): Promise<void> {
    const decision = evaluateRespawn(this.deaths, this.deps.lane.respawn, this.deps.now());
    if (decision.action !== 'wait') return;
    this.deps.log.info({ delayMs: decision.delayMs, reason: decision.reason }, 'respawn backoff');
    await this.deps.sleep(decision.delayMs, this.stopping.signal);
  }

  /**
   * Between cards: a sandbox past its age is recycled (a fresh one is made at once), and an idle
   * slot that may go without one (`mayRelease`: above the lane's minSlots) lets it go after
   * idleReleaseMs. Neither is a death. Nothing happens while a card, a probe or a spawn is out.
   */
  async renewIdle(mayRelease: boolean): Promise<void> {
    if (!this.handle || this.cardId !== undefined || this.probing || this.spawning) return;
    const now = this.deps.now();
    const renewal = this.renewal({ moment: 'idle', ageMs: now - this.sandboxCreatedAt, idleMs: now - this.idleSince, mayRelease });
    if (renewal.action === 'keep') return;
    await this.renew(renewal);
    if (renewal.action === 'recycle' && !this.stopped && !this.handle) this.spawning ??= this.spawn(false);
  }

  private renewal(snapshot: Parameters<typeof evaluateSandboxRenewal>[0]): SandboxRenewalDecision {
    const { lane } = this.deps;
    return evaluateSandboxRenewal(snapshot, { recycleAfterMs: lane.sandboxRecycleAfterMs, lifetimeMs: lane.sandboxLifetimeMs, idleReleaseMs: lane.idleReleaseMs });
  }

  /** Recycles or releases the live sandbox on purpose: terminated by id, announced, no death recorded. */
  private async renew(renewal: Exclude<SandboxRenewalDecision, { action: 'keep' }>): Promise<void> {
    const old = this.handle;
    if (!old) return;
    const { log, events, lane, now } = this.deps;
    this.apply(renewal.action === 'recycle' ? { type: 'recycle' } : { type: 'release-sandbox' });
    const type = renewal.action === 'recycle' ? 'sandbox.recycled' : 'sandbox.released';
    log.info({ event: type, sandboxId: old.id, reason: renewal.reason }, type);
    void events.append({ type, at: new Date(now()).toISOString(), lane: lane.name, slot: this.id, sandboxId: old.id, data: { reason: renewal.reason } }).catch(() => undefined);
    this.deps.record({ ...this.recordOf(old), state: 'terminated' });
    await this.deps.terminator.terminate(old.id, renewal.action === 'recycle' ? 'recycled' : 'released while idle');
  }

  /** Says which card is the sandbox's now, answering the one it ran before, if this sandbox ran it (a new sandbox ran none). */
  swapLastCard(handle: SandboxHandle, cardId: string): string | undefined {
    const previous = this.lastCard?.sandboxId === handle.id ? this.lastCard.cardId : undefined;
    this.lastCard = { sandboxId: handle.id, cardId };
    return previous;
  }

  /** Starts an idle probe unless this slot's previous one is still out (see SlotIdleProbe). */
  probeIdle(): Promise<void> {
    return this.idle.probe();
  }

  /** An idle probe or canary is out on the sandbox. */
  get probing(): boolean {
    return this.idle.probing;
  }

  /** A card's probe canary that did not answer counts with the idle canaries (see SlotIdleProbe). */
  countCardCanary(handle: SandboxHandle, reading: CanaryReading): void {
    this.idle.countCardCanary(handle, reading);
  }

  /** Flags the sandbox dead (an explicit finding only), terminates it by id and respawns in the background. */
  markDead(observedExitCode: ObservedExitCode, reason: string): void {
    const old = this.handle;
    const { log, events, lane, now } = this.deps;
    // A stopping slot terminates its sandbox anyway; there is nothing to respawn.
    if (this.stopped) return;
    this.apply({ type: 'dead', observedExitCode }, false);
    this.countDeath();
    log.warn({ event: 'sandbox.dead', sandboxId: old?.id, observedExitCode, reason }, 'sandbox.dead');
    void events
      .append({ type: 'sandbox.dead', at: new Date(now()).toISOString(), lane: lane.name, slot: this.id, sandboxId: old?.id, data: { observedExitCode, reason } })
      .catch(() => undefined);
    if (old) this.deps.record({ ...this.recordOf(old), state: 'dead', deadAt: new Date(now()).toISOString(), observedExitCode, reason });
    this.deps.onChange(this);
    this.spawning = (async (): Promise<SpawnResult> => {
      if (old) await this.deps.terminator.terminate(old.id, 'dead');
      await this.backOff();
      return this.spawn(true);
    })();
  }

  /**
   * Creates a sandbox from the base image, re-applies file sync, and passes the canary before it is
   * live. A slot stopped meanwhile makes no sandbox, or terminates the one it made, at each await.
   */
  private async spawn(respawn: boolean): Promise<SpawnResult> {
    const { breaker } = this.deps;
    if (this.stopped) return this.stoppedReadiness();
    const gate = await breaker.gate();
    if (this.stopped) return this.stoppedReadiness();
    if (gate.action === 'wait') {
      this.apply({ type: 'wait-provider' });
      return { kind: 'wait', retryAt: gate.retryAt, reason: gate.reason };
    }
    this.apply({ type: 'spawn', respawn });
    const created = await this.create();
    if (!('id' in created)) return created;
    if (this.stopped) return this.abandon(created, 'created while stopping');
    const failure = await this.prepare(created);
    if (failure instanceof Error) {
      await this.deps.terminator.terminate(created.id, 'misconfigured');
      return this.misconfigured(failure);
    }
    if (failure) return this.failed(failure, created);
    // The breaker's reset travels with the live announcement: one round trip before the first card, not two.
    const passed = breaker.canaryPassed();
    if (this.stopped) {
      await passed;
      return this.abandon(created, 'prepared while stopping');
    }
    return this.goLive(created, respawn, passed);
  }

  /** Asks the provider for a sandbox, recorded before anything uses it; a failure is a misconfiguration or a death. */
  private async create(): Promise<SandboxHandle | SpawnResult> {
    const { lane, provider, now } = this.deps;
    const createdAt = now();
    let handle: SandboxHandle;
    try {
      handle = await provider.create(
        { image: lane.image, tags: { lane: lane.name, slot: this.id, worker: this.deps.workerId }, env: lane.env, secrets: lane.secrets, timeoutMs: lane.sandboxLifetimeMs },
        { connectTimeoutMs: lane.connectTimeoutMs },
      );
    } catch (err) {
      return isConfigError(err) ? this.misconfigured(err) : this.failed(String(err));
    }
    // Recorded before anything uses it (file sync, canary): a worker that dies from here on leaves a
    // sandbox the supervisor can still attribute, and reap, when the provider lists it without tags.
    this.deps.record({ ...this.recordOf(handle), state: 'creating' });
    this.sandboxCreatedAt = createdAt;
    return handle;
  }

  /** A create or a preparation failed: the breaker hears of it, it counts as a death, and the new sandbox (if any) goes. */
  private async failed(reason: string, handle?: SandboxHandle): Promise<SpawnResult> {
    await this.deps.breaker.failure(reason);
    this.countDeath();
    if (!handle) {
      this.deps.log.warn({ err: reason, event: 'sandbox.create-failed' }, 'sandbox create failed');
      return { kind: 'retry', reason };
    }
    this.deps.log.warn({ sandboxId: handle.id, reason }, 'new sandbox failed its preparation');
    await this.deps.terminator.terminate(handle.id, 'failed its preparation');
    return { kind: 'retry', reason };
  }

  /** A sandbox made while the slot was being stopped never goes live. */
  private async abandon(handle: SandboxHandle, why: string): Promise<SpawnResult> {
    await bestEffort(`terminate sandbox ${why}`, () => handle.terminate(), warnTo(this.deps.log));
    return this.stoppedReadiness();
  }

  private stoppedReadiness(): SpawnResult {
    return { kind: 'wait', retryAt: this.deps.now(), reason: 'slot stopped' };
  }

  /**
   * The sandbox passed its canary: recorded live (replacing a dead one, if so), announced, and the
   * slot's at once; `passed` is the breaker's reset, sent with the announcement.
   */
  private goLive(handle: SandboxHandle, respawn: boolean, passed: Promise<unknown>): SpawnResult {
    const { lane, log, now } = this.deps;
    const replaced = this.dead?.sandboxId;
    if (replaced) this.deps.record({ ...this.recordOf({ id: replaced }), state: 'dead', replacedBy: handle.id });
    this.deps.record({ ...this.recordOf(handle), state: 'live', liveAt: new Date(now()).toISOString() });
    this.idle.reset();
    this.apply({ type: 'live', handle });
    if (this.cardId === undefined) this.idleSince = now();
    const type = respawn ? 'sandbox.respawned' : 'sandbox.live';
    log.info({ event: type, sandboxId: handle.id, pid: handle.pid }, type);
    const announced = this.deps.events
      .append({ type, at: new Date(now()).toISOString(), lane: lane.name, slot: this.id, sandboxId: handle.id, data: handle.pid ? { pid: handle.pid } : {} })
      .catch(() => undefined);
    // The first card need not wait for either. Its move to running follows the announcement on the
    // same connection, so Redis has the announcement before the card runs; the breaker's reset (on
    // the breaker store's own connection) gates only creates, not this sandbox's cards. What
    // re-drives blocked cards waits for the reset, as before.
    void Promise.all([passed, announced]).then(
      () => this.deps.onLive(this, respawn),
      (err: unknown) => log.warn({ err: String(err), sandboxId: handle.id }, 'breaker reset after a passed canary failed'),
    );
    return { kind: 'live', handle };
  }

  /** Says the lane cannot make a sandbox as configured; the slot tries again for the next card. */
  private misconfigured(err: ProviderInvalidError | ConfigError): Readiness {
    const reason = `lane ${this.deps.lane.name} is misconfigured: ${err.message}`;
    this.deps.log.error({ event: 'lane.misconfigured', err: err.message }, 'lane.misconfigured');
    return { kind: 'misconfigured', reason };
  }

  /** File sync and the canary (unless the create ran one and nothing changed since); returns why it failed (a config error as such), or undefined. */
  private async prepare(handle: SandboxHandle): Promise<string | ProviderInvalidError | ConfigError | undefined> {
    const { lane, filesBaseDir, newNonce } = this.deps;
    try {
      if (lane.files.length) {
        const summary = await syncFiles(handle, lane.files, {
          baseDir: filesBaseDir,
          onProgress: (p) =>
            this.deps.log.info(
              { event: 'sandbox.sync', sandboxId: handle.id, batch: p.batch, batches: p.batches, entries: p.entries, totalEntries: p.totalEntries },
              'file sync progress',
            ),
        });
        this.deps.log.info({ event: 'sandbox.synced', sandboxId: handle.id, ...summary }, 'file sync done');
      }
    } catch (err) {
      if (isConfigError(err)) return err;
      return `file sync failed: ${String(err)}`;
    }
    // One canary per new sandbox: on Modal a second would cost every create one more exec round trip.
    if (lane.files.length === 0 && handle.passedCanaryAtCreate) return undefined;
    const reading = await runCanary(handle, { newNonce, canaryTimeoutMs: lane.canaryTimeoutMs });
    return reading.finding.kind === 'polled' && reading.finding.canary === 'answered' ? undefined : `canary: ${reading.reason}`;
  }

  private recordOf(handle: { id: string; pid?: number | undefined }): SandboxRecord {
    const { lane, workerId, provider } = this.deps;
    return { id: handle.id, provider: provider.name, state: 'live', lane: lane.name, slot: this.id, worker: workerId, ...(handle.pid !== undefined ? { pid: handle.pid } : {}) };
  }

  status(heartbeatAt: number): SlotStatus {
    const sandboxState: SandboxState | undefined = this.state === 'live' ? 'live' : this.state === 'dead' ? 'dead' : this.state === 'stopped' ? 'terminated' : 'creating';
    const id = this.handle?.id ?? this.dead?.sandboxId ?? (this.snapshot.sandbox.state === 'stopped' ? this.snapshot.sandbox.handle?.id : undefined);
    const observedExitCode = this.dead?.observedExitCode;
    return {
      slot: this.id,
      worker: this.deps.workerId,
      ...(this.cardId ? { cardId: this.cardId } : {}),
      ...(id && sandboxState
        ? {
            sandbox: {
              id,
              state: sandboxState,
              provider: this.deps.provider.name,
              ...(this.handle?.pid !== undefined ? { pid: this.handle.pid } : {}),
              ...(observedExitCode !== undefined ? { observedExitCode } : {}),
            },
          }
        : {}),
      heartbeatAt: new Date(heartbeatAt).toISOString(),
    };
  }

  /** First half of stop, synchronous: no new sandbox, and any backoff wait ends now. */
  halt(): void {
    this.apply({ type: 'halt' }, false);
    this.stopping.abort();
  }

  /**
   * Scale-down: the slot ends for good and its sandbox is terminated by id (retried each beat until
   * confirmed). Only an idle slot is retired: a slot holding a card throws IllegalStateError.
   * Resolves to the terminated sandbox's id, if it had one.
   */
  async retire(reason: string): Promise<string | undefined> {
    if (this.cardId !== undefined) throw new IllegalStateError(`slot ${this.id} holds card ${this.cardId}: only an idle slot is retired`);
    const handle = await this.end();
    if (!handle) return undefined;
    await this.deps.terminator.terminate(handle.id, reason);
    this.deps.record({ ...this.recordOf(handle), state: 'terminated' });
    this.deps.log.info({ event: 'sandbox.terminated', sandboxId: handle.id, reason }, 'sandbox.terminated');
    return handle.id;
  }

  async stop(): Promise<void> {
    const handle = await this.end();
    if (handle) await bestEffort('terminate sandbox on stop', () => handle.terminate(), warnTo(this.deps.log));
  }

  /** Halts the slot, lets a spawn in flight land, and takes the sandbox it held (to be terminated by the caller). */
  private async end(): Promise<SandboxHandle | undefined> {
    this.halt();
    const spawning = this.spawning;
    if (spawning) await spawning.catch(() => undefined);
    const p = this.snapshot.sandbox;
    const handle = p.state === 'stopped' ? p.handle : undefined;
    this.apply({ type: 'terminated' }, false);
    return handle;
  }
}
