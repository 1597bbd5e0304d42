import type { Logger } from 'pino';
import type { LaneConfig } from '@lanes/contracts';
import { keys, type CasStore, type EventLog } from '@lanes/queue';
import {
  INITIAL_BREAKER,
  breakerOnCanaryPassed,
  breakerOnFailure,
  breakerOnTick,
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
  /**
   * Called when this process moved the breaker to half-open on its own schedule, so a live slot
   * can run the one probe (its canary). Without it, a lane whose slots all stay live would never
   * create, never probe, and read "outage" forever.
   */
  onHalfOpen?: () => void;
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
  /** Fires at the open breaker's retry time: the breaker lives on its own schedule, not on creates. */
  private retryTimer: NodeJS.Timeout | undefined;
  private closed = false;

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

  /** Time passing: an open breaker that is due half-opens (also run by the retry timer). */
  tick(): Promise<Step> {
    return this.apply((s, now) => breakerOnTick(s, this.config, now));
  }

  /** Stops the retry timer; the shared snapshot stays for the other workers. */
  close(): void {
    this.closed = true;
    clearTimeout(this.retryTimer);
  }

  /** Arms the retry timer while the snapshot is open, so half-open comes on time even with no create. */
  private schedule(snapshot: BreakerSnapshot): void {
    clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    if (this.closed || snapshot.state !== 'open' || snapshot.retryAt === undefined) return;
    const delayMs = Math.max(0, snapshot.retryAt - this.deps.now());
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      void this.tick();
    }, delayMs);
    this.retryTimer.unref();
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
    this.schedule(step.snapshot);
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
    if (step.transition === 'half-open') this.deps.onHalfOpen?.();
  }
}
