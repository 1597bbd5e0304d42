import type { Logger } from 'pino';
import type { LaneConfig } from '@lanes/contracts';
import type { FleetStore, LaneQueues } from '@lanes/queue';
import { evaluateSlotScaling, livenessOf, type SlotScalingDecision, type SlotScalingSnapshot } from '@lanes/supervision';
import type { LaneBreaker } from './lane-breaker.js';
import type { SlotPool } from './slot-pool.js';

/** What the scaler needs from its lane worker: read the pool, add a slot, retire idle ones. */
export interface SlotScalerContext {
  lane: LaneConfig;
  workerId: string;
  pool: SlotPool;
  breaker: LaneBreaker;
  queues: LaneQueues;
  fleet: FleetStore;
  log: Logger;
  now: () => number;
  addSlot: (reason: string) => void;
  /** Detaches the idle slots from the pool at once, then retires them; false if none was idle any more. */
  retireSlots: (slotIds: readonly string[], reason: string) => boolean;
}

/**
 * Slots that follow the queue, for one lane in one process. Each tick: read a snapshot (the lane's
 * waiting and active cards, the workers hosting it, this worker's slots), ask the pure
 * `evaluateSlotScaling`, then act. The decision's `surplusSince` and the time of the last change
 * are all the state carried between ticks.
 */
export class SlotScaler {
  private lastChangeAt: number | undefined;
  private surplusSince: number | undefined;
  private inFlight: Promise<void> | undefined;
  /** When demandRose last asked for a tick. */
  private lastDemandTickAt: number | undefined;

  constructor(private readonly ctx: SlotScalerContext) {}

  /** One tick; at most one in flight (a slow Redis read skips the next tick, never stacks them). */
  tick(): Promise<void> {
    return (this.inFlight ??= this.run().finally(() => (this.inFlight = undefined)));
  }

  /**
   * A card took this worker's last free slot while the lane may grow here: tick now, not at the next
   * heartbeat, so a burst's slots start at once (issue 29: a 200-card burst waited up to a heartbeat,
   * 2 s, for its first growth). At most once per cooldown, and not within the cooldown of the last
   * change, where a tick could only hold: a lane that stays full below its maximum (every slot busy,
   * nothing waiting) would otherwise pay the tick's reads for every card.
   */
  demandRose(): void {
    const { cooldownMs } = this.ctx.lane.slotScaling;
    const now = this.ctx.now();
    const within = (at: number | undefined) => at !== undefined && now - at < cooldownMs;
    if (within(this.lastChangeAt) || within(this.lastDemandTickAt)) return;
    this.lastDemandTickAt = now;
    this.tick().catch((err: unknown) => this.ctx.log.warn({ err }, 'slot scaling on demand failed'));
  }

  /** A change made outside a tick (a card that found every slot busy) restarts the cooldown. */
  changed(): void {
    this.lastChangeAt = this.ctx.now();
  }

  private async run(): Promise<void> {
    const snapshot = await this.read();
    const decision = evaluateSlotScaling(snapshot, { ...this.ctx.lane, ...this.ctx.lane.slotScaling }, this.ctx.now());
    this.surplusSince = decision.surplusSince;
    this.act(decision);
  }

  private async read(): Promise<SlotScalingSnapshot> {
    const { lane, queues, fleet, pool, breaker, workerId } = this.ctx;
    const [counts, slots, verdicts] = await Promise.all([queues.queue(lane.name)!.getJobCounts('waiting', 'prioritized', 'active'), fleet.slots(lane.name), fleet.liveness()]);
    const others = slots.filter((s) => s.worker !== workerId && livenessOf(verdicts, s.worker) !== 'gone');
    const workers = new Set([workerId, ...others.map((s) => s.worker)]);
    return {
      // Read after the awaits: the pool may have changed while Redis answered.
      slots: pool.slots.map((s) => ({ id: s.id, live: s.state === 'live', busy: s.cardId !== undefined, probing: s.probing })),
      waiting: (counts.waiting ?? 0) + (counts.prioritized ?? 0),
      active: counts.active ?? 0,
      workers: workers.size,
      otherLiveSlots: others.filter((s) => s.sandbox?.state === 'live').length,
      breaker: breaker.state.state,
      ...(this.lastChangeAt !== undefined ? { lastChangeAt: this.lastChangeAt } : {}),
      ...(this.surplusSince !== undefined ? { surplusSince: this.surplusSince } : {}),
    };
  }

  private act(decision: SlotScalingDecision): void {
    const { log, now } = this.ctx;
    switch (decision.action) {
      case 'hold':
        log.debug({ event: 'slot.hold', target: decision.target, reason: decision.reason }, 'slot.hold');
        return;
      case 'add':
        for (let i = 0; i < decision.count; i++) this.ctx.addSlot(decision.reason);
        this.lastChangeAt = now();
        return;
      case 'remove':
        if (this.ctx.retireSlots(decision.slotIds, decision.reason)) this.lastChangeAt = now();
    }
  }
}
