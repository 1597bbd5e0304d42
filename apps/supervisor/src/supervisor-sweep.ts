import type { Logger } from 'pino';
import type { LaneConfig, LivenessVerdict } from '@lanes/contracts';
import type { CardStore, EventLog, EventWindow, FleetStore, LaneQueues, StoredEvent } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import {
  attributeOwners,
  evaluateFleet,
  evaluateOrphans,
  evaluateRedriveGate,
  evaluateWorkerRecords,
  selectRedrive,
  slotVerdictsOf,
  verdictsByWorker,
  type BeatObservation,
  type ListedSandbox,
  type LivenessTracker,
  type OrphanDecision,
} from '@lanes/supervision';

/** Verdicts older than this no longer shape the lane's health. */
export const FLEET_WINDOW_MS = 60_000;
/**
 * Published liveness verdicts live this many heartbeat timeouts: a dozen sweeps at the default
 * cadence, so a slow sweep never lets them lapse, yet a stopped supervisor's verdicts soon read as unknown.
 */
const LIVENESS_TTL_TIMEOUTS = 3;

export interface SupervisorSweepDeps {
  lanes: readonly LaneConfig[];
  log: Logger;
  store: CardStore;
  fleet: FleetStore;
  queues: LaneQueues;
  events: EventLog;
  recentEvents: EventWindow;
  liveness: LivenessTracker;
  /** Providers whose sandboxes this supervisor may reap, deduplicated by instance. */
  providers: readonly SandboxProvider[];
  heartbeatTimeoutMs: number;
  /** A gone worker's sandboxes are reaped only once its silence outlasts its runs' lock. */
  reapAfterSilenceMs: number;
  /** Wall clock, for event timestamps and the fleet window only. */
  now: () => number;
  /** This process's monotonic clock (ms), the only clock liveness is judged on. */
  monotonicNow: () => number;
}

/**
 * One supervisor sweep: judge the workers' liveness, reap orphans by id, forget gone workers,
 * and per lane publish its health and re-drive the cards a dead worker left blocked. Each step reads
 * a snapshot, asks a pure decision of libs/supervision, and carries it out.
 */
export class SupervisorSweep {
  private previousVerdicts: Record<string, LivenessVerdict> = {};

  constructor(private readonly deps: SupervisorSweepDeps) {}

  async run(): Promise<void> {
    const { visible, verdicts } = await this.judgeLiveness();
    // A sweep that could not read Redis is not evidence of anything: nothing is reaped or forgotten.
    if (!visible) return;
    await this.deps.fleet.putLiveness(Object.values(verdicts), LIVENESS_TTL_TIMEOUTS * this.deps.heartbeatTimeoutMs);
    const remaining = await this.reapOrphans(verdicts);
    if (remaining) await this.forgetGoneWorkers(verdicts, remaining);
    const recent = await this.deps.recentEvents.read(this.deps.now());
    for (const lane of this.deps.lanes) await this.laneSweep(lane, verdicts, recent);
  }

  /** Reads the beats, folds them into the tracker on this host's monotonic clock, and judges every worker. */
  private async judgeLiveness(): Promise<{ visible: boolean; verdicts: Record<string, LivenessVerdict> }> {
    const { fleet, liveness, log } = this.deps;
    let observation: BeatObservation;
    try {
      observation = { ok: true, ...(await fleet.readBeats()) };
    } catch (err) {
      observation = { ok: false, reason: err instanceof Error ? err.message : String(err) };
    }
    // Read after the beats arrive: a read that hung across an outage must show as a gap.
    const at = this.deps.monotonicNow();
    const visibility = liveness.observe(observation, at);
    if (visibility?.event === 'liveness.redis-lost') log.warn({ event: visibility.event, reason: visibility.reason }, visibility.event);
    else if (visibility) log.info({ event: visibility.event, reason: visibility.reason }, visibility.event);
    const verdicts = verdictsByWorker(liveness.verdicts(at));
    for (const v of Object.values(verdicts)) {
      if (v.liveness !== this.previousVerdicts[v.worker]?.liveness) log.info({ event: `worker.${v.liveness}`, worker: v.worker, reason: v.reason }, `worker.${v.liveness}`);
    }
    this.previousVerdicts = verdicts;
    return { visible: observation.ok, verdicts };
  }

  /** Reaps orphans; answers every sandbox still listed, or undefined when a provider could not list (then nothing is forgotten). */
  private async reapOrphans(verdicts: Record<string, LivenessVerdict>): Promise<ListedSandbox[] | undefined> {
    const remaining: ListedSandbox[] = [];
    let complete = true;
    for (const provider of new Set(this.deps.providers)) {
      const listed = await this.listWithOwners(provider);
      if (!listed) {
        complete = false;
        continue;
      }
      for (const decision of evaluateOrphans({ sandboxes: listed, liveness: verdicts }, { reapAfterSilenceMs: this.deps.reapAfterSilenceMs })) {
        const ref = listed.find((s) => s.id === decision.id);
        if (!(await this.carryOut(provider, decision, ref)) && ref) remaining.push(ref);
      }
    }
    return complete ? remaining : undefined;
  }

  /** One orphan decision carried out; answers whether the sandbox is gone now. */
  private async carryOut(provider: SandboxProvider, decision: OrphanDecision, ref: ListedSandbox | undefined): Promise<boolean> {
    switch (decision.action) {
      case 'keep':
        return false;
      case 'reap':
        return this.reap(provider, decision.id, decision.reason, ref);
    }
  }

  /** The provider's sandboxes, owners the listing does not tag taken from lanes' own record of what it created; undefined when it could not list. */
  private async listWithOwners(provider: SandboxProvider): Promise<ListedSandbox[] | undefined> {
    try {
      const listed = await provider.list();
      const untagged = listed.filter((s) => !s.tags.worker).map((s) => s.id);
      return untagged.length ? attributeOwners(listed, await this.deps.fleet.sandboxOwners(untagged)) : listed;
    } catch (err) {
      this.deps.log.warn({ err, provider: provider.name }, 'could not list sandboxes; no reaping on this provider this sweep');
      return undefined;
    }
  }

  /** Terminates one orphan by id and says so (log and event); false when the terminate failed (it is tried again next sweep). */
  private async reap(provider: SandboxProvider, id: string, reason: string, ref: ListedSandbox | undefined): Promise<boolean> {
    const { log, events } = this.deps;
    try {
      await provider.terminateById(id);
    } catch (err) {
      log.warn({ err, sandboxId: id }, 'orphan terminate failed; retrying next sweep');
      return false;
    }
    log.warn({ event: 'sandbox.reaped', sandboxId: id, lane: ref?.tags.lane, slot: ref?.tags.slot, reason }, 'sandbox.reaped');
    await events.append({
      type: 'sandbox.reaped',
      at: new Date(this.deps.now()).toISOString(),
      lane: ref?.tags.lane ?? 'unknown',
      sandboxId: id,
      ...(ref?.tags.slot ? { slot: ref.tags.slot } : {}),
      data: { reason, owner: ref?.tags.worker ?? null },
    });
    return true;
  }

  /** Drops the records of workers that are gone and own nothing any more, so dead workers do not pile up. */
  private async forgetGoneWorkers(verdicts: Record<string, LivenessVerdict>, remaining: ListedSandbox[]): Promise<void> {
    const { fleet, lanes, log } = this.deps;
    for (const decision of evaluateWorkerRecords({ sandboxes: remaining, liveness: verdicts })) {
      switch (decision.action) {
        case 'keep':
          continue;
        case 'forget':
          for (const lane of lanes) await fleet.removeSlots(lane.name, decision.worker);
          await fleet.forgetWorker(decision.worker);
          log.info({ event: 'worker.forgotten', worker: decision.worker, reason: decision.reason }, 'worker.forgotten');
      }
    }
  }

  /** The lane's health, published (and logged when it changes), then the re-drive of cards a dead worker left blocked. */
  private async laneSweep(lane: LaneConfig, verdicts: Record<string, LivenessVerdict>, recent: StoredEvent[]): Promise<void> {
    const { store, fleet, log, now } = this.deps;
    // Listed before the breaker is read: a worker opens the breaker before it blocks a card for an
    // outage, so no listed card is judged on a breaker read older than its block.
    const blocked = await store.blocked(lane.name);
    const breaker = await fleet.breaker(lane.name);
    const health = evaluateFleet({ breaker: breaker.state, recentVerdicts: slotVerdictsOf(recent, lane.name) }, { windowMs: FLEET_WINDOW_MS }, now());
    const previous = await fleet.health(lane.name);
    await fleet.putHealth(lane.name, { status: health.status, reason: health.reason, at: new Date(now()).toISOString() });
    if (previous?.status !== health.status) log.info({ lane: lane.name, event: 'lane.health', status: health.status, reason: health.reason }, 'lane.health');
    // A card blocked by a worker that died before re-driving it: re-drive once any live slot of the lane exists.
    const gate = evaluateRedriveGate({ breaker: breaker.state, slots: await fleet.slots(lane.name), liveness: verdicts });
    switch (gate.action) {
      case 'hold':
        return;
      case 'open': {
        const select = (cards: Parameters<typeof selectRedrive>[0]) => selectRedrive(cards, { type: 'sandbox-live', lane: lane.name });
        const { ids } = await this.deps.queues.redriveBlocked(lane.name, blocked, select, 're-driven by supervisor sweep');
        for (const id of ids) log.info({ event: 'card.redriven', cardId: id, lane: lane.name, trigger: 'supervisor-sweep' }, 'card.redriven');
      }
    }
  }
}
