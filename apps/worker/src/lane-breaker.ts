import type { Logger } from 'pino';
import type { LaneConfig } from '@lanes/contracts';
import type { EventLog, FleetStore } from '@lanes/queue';
import {
  INITIAL_BREAKER,
  breakerOnCanaryPassed,
  breakerOnFailure,
  evaluateCreate,
  type BreakerSnapshot,
  type BreakerStep,
  type CreateDecision,
} from '@lanes/supervision';

export interface LaneBreakerDeps {
  lane: LaneConfig;
  fleet: FleetStore;
  events: EventLog;
  log: Logger;
  now: () => number;
  /** Called once the breaker closes, so provider-outage cards are re-driven. */
  onClosed: () => void;
}

/** Holds one lane/provider breaker snapshot and carries out its transitions (events, logs, publishing). */
export class LaneBreaker {
  private snapshot: BreakerSnapshot = INITIAL_BREAKER;

  constructor(private readonly deps: LaneBreakerDeps) {}

  get state(): BreakerSnapshot {
    return this.snapshot;
  }

  private get config() {
    const { lane } = this.deps;
    return { ...lane.breaker, probeLeaseMs: lane.connectTimeoutMs + lane.canaryTimeoutMs };
  }

  /** Asks whether a create may go now; `wait` carries the time cards should be delayed to. */
  gate(): CreateDecision {
    const decision = evaluateCreate(this.snapshot, this.config, this.deps.now());
    this.apply(decision);
    return decision;
  }

  failure(detail: string): void {
    this.apply(breakerOnFailure(this.snapshot, this.config, this.deps.now()), detail);
  }

  /** The only reset: a sandbox passed its canary. */
  canaryPassed(): void {
    this.apply(breakerOnCanaryPassed(this.snapshot, this.deps.now()));
  }

  private apply(step: Pick<BreakerStep, 'snapshot' | 'transition' | 'reason'>, detail?: string): void {
    const before = this.snapshot;
    this.snapshot = step.snapshot;
    if (!step.transition && before.failures.length === step.snapshot.failures.length) return;
    const { lane, log, events, fleet, now } = this.deps;
    const retryAt = step.snapshot.retryAt === undefined ? undefined : new Date(step.snapshot.retryAt).toISOString();
    if (step.transition) {
      const type = step.transition === 'opened' ? 'breaker.opened' : step.transition === 'closed' ? 'breaker.closed' : 'breaker.half-open';
      log.warn({ event: type, reason: step.reason, detail, retryAt }, type);
      void events
        .append({ type, at: new Date(now()).toISOString(), lane: lane.name, data: { reason: step.reason, ...(retryAt ? { retryAt } : {}) } })
        .catch((err: unknown) => log.warn({ err }, 'event append failed'));
      if (step.transition === 'closed') this.deps.onClosed();
    }
    void fleet
      .putBreaker(lane.name, { state: step.snapshot.state, failures: step.snapshot.failures.length, ...(retryAt ? { retryAt } : {}) })
      .catch((err: unknown) => log.warn({ err }, 'breaker publish failed'));
  }
}
