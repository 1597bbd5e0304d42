import type { Logger } from 'pino';
import type { LaneConfig } from '@lanes/contracts';
import { keys, type CasStore, type EventLog } from '@lanes/queue';
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
  /** Where the lane's snapshot lives: every worker process of the lane shares one breaker. */
  cas: CasStore;
  events: EventLog;
  log: Logger;
  now: () => number;
  /** Called once the breaker closes, so provider-outage cards are re-driven. */
  onClosed: () => void;
}

type Step = Pick<BreakerStep, 'snapshot' | 'transition' | 'reason'>;

/**
 * The lane/provider breaker, shared by every worker through Redis: failures anywhere count toward
 * it, and once open no worker creates until its retry time. The decisions are the pure functions of
 * libs/supervision; this class reads the snapshot, applies one, writes it back atomically, and
 * announces the transition it made. If Redis cannot be reached it keeps deciding on its last copy.
 */
export class LaneBreaker {
  private last: BreakerSnapshot = INITIAL_BREAKER;

  constructor(private readonly deps: LaneBreakerDeps) {}

  /** The last snapshot this process saw. */
  get state(): BreakerSnapshot {
    return this.last;
  }

  private get config() {
    const { lane } = this.deps;
    return { ...lane.breaker, probeLeaseMs: lane.connectTimeoutMs + lane.canaryTimeoutMs };
  }

  /** Asks whether a create may go now; `wait` carries the time cards should be delayed to. */
  gate(): Promise<CreateDecision> {
    return this.apply((s, now) => evaluateCreate(s, this.config, now));
  }

  failure(detail: string): Promise<Step> {
    return this.apply((s, now) => breakerOnFailure(s, this.config, now), detail);
  }

  /** The only reset: a sandbox passed its canary. */
  canaryPassed(): Promise<Step> {
    return this.apply((s, now) => breakerOnCanaryPassed(s, now));
  }

  private async apply<T extends Step>(decide: (s: BreakerSnapshot, now: number) => T, detail?: string): Promise<T> {
    const { cas, lane, log, now } = this.deps;
    let step: T;
    try {
      step = await cas.update<BreakerSnapshot, T>(keys.breaker(lane.name), (current) => {
        const result = decide(current ?? INITIAL_BREAKER, now());
        return { next: result.snapshot, result };
      });
    } catch (err) {
      log.warn({ err: String(err) }, 'shared breaker unreachable: deciding on the last local copy');
      step = decide(this.last, now());
    }
    this.last = step.snapshot;
    if (step.transition) this.announce(step, detail);
    return step;
  }

  private announce(step: Step, detail?: string): void {
    const { lane, log, events, now } = this.deps;
    const retryAt = step.snapshot.retryAt === undefined ? undefined : new Date(step.snapshot.retryAt).toISOString();
    const type = step.transition === 'opened' ? 'breaker.opened' : step.transition === 'closed' ? 'breaker.closed' : 'breaker.half-open';
    log.warn({ event: type, reason: step.reason, detail, retryAt }, type);
    void events
      .append({ type, at: new Date(now()).toISOString(), lane: lane.name, data: { reason: step.reason, ...(retryAt ? { retryAt } : {}) } })
      .catch((err: unknown) => log.warn({ err }, 'event append failed'));
    if (step.transition === 'closed') this.deps.onClosed();
  }
}
