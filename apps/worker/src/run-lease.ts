import type { Job } from 'bullmq';
import type { Logger } from 'pino';
import { evaluateLease, fenceMarginFor, LEASE_TICK_MS, renewEveryFor, type LeaseDecision, type LeaseSnapshot } from './lease.js';

export type FenceDecision = Extract<LeaseDecision, { action: 'fence' }>;

export interface RunLeaseDeps {
  job: Pick<Job, 'extendLock'>;
  /** BullMQ's lock token for this take of the job: the run token. */
  token: string;
  lockDurationMs: number;
  killGraceMs: number;
  /** Monotonic: a wall-clock step must not fence a run, nor keep a lost one going. */
  monotonicNow: () => number;
  /** Called once, at the moment the run must stop: kill the agent's group and discard the result. */
  onFence: (decision: FenceDecision) => void;
  log: Logger;
}

/**
 * The shell around `evaluateLease` for one run: it renews the job's lock itself (recording when
 * each confirmed renewal was sent), hears BullMQ's `lockRenewalFailed`, and checks the rule every
 * tick, so a Redis that stops answering fences the run on time even though no reply ever comes.
 */
export class RunLease {
  private snapshot: LeaseSnapshot;
  private inFlight = false;
  private lastSentAtMs: number;
  private timer: NodeJS.Timeout | undefined;
  private fence: FenceDecision | undefined;
  private readonly fenced: Promise<FenceDecision>;
  private resolveFenced: (d: FenceDecision) => void = () => undefined;
  private readonly confirmed: Promise<true>;
  private resolveConfirmed: (v: true) => void = () => undefined;
  private started = false;
  private isConfirmed = false;

  constructor(private readonly deps: RunLeaseDeps) {
    // Until the first renewal is confirmed, nothing runs; the take's own lock is not counted on.
    const now = deps.monotonicNow();
    this.snapshot = { lastRenewalSentAtMs: now };
    this.lastSentAtMs = now;
    this.fenced = new Promise((resolve) => (this.resolveFenced = resolve));
    this.confirmed = new Promise((resolve) => (this.resolveConfirmed = resolve));
  }

  /** Why the run was fenced, once it has been (a method: it changes under any await). */
  fenceDecision(): FenceDecision | undefined {
    return this.fence;
  }

  /**
   * Starts the lease's clock: renewals every renewEveryFor(lock), the fence rule every tick. The
   * first renewal is the caller's: `confirm()`, or a command that renews the lock itself (the move
   * to running, `renewedBy`).
   */
  start(): void {
    if (this.started) return;
    this.started = true;
    this.timer = setInterval(() => this.tick(), LEASE_TICK_MS);
  }

  /** Renews now unless a renewal is confirmed or out; resolves true once Redis confirmed the lock is this run's, false if the run is fenced first. */
  confirm(): Promise<boolean> {
    this.start();
    if (!this.isConfirmed && !this.inFlight && !this.fence) void this.renew();
    return this.settled();
  }

  /** True once Redis confirmed the lock is this run's, false if the run is fenced first; sends nothing. */
  settled(): Promise<boolean> {
    return Promise.race([this.confirmed, this.fenced.then(() => false as const)]);
  }

  /** Resolves with the fence, once the run is fenced. */
  whenFenced(): Promise<FenceDecision> {
    return this.fenced;
  }

  /** A command sent at `sentAtMs` (monotonic) renewed the lock, and Redis said so: it counts as a renewal. */
  renewedBy(sentAtMs: number): void {
    this.lastSentAtMs = Math.max(this.lastSentAtMs, sentAtMs);
    this.confirmRenewal(sentAtMs);
  }

  /** BullMQ reported that this job's lock could not be renewed. */
  lost(cause: 'lock-renewal-failed'): void {
    this.snapshot = { ...this.snapshot, lost: cause };
    this.tick();
  }

  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  private tick(): void {
    if (this.fence) return;
    const { lockDurationMs, killGraceMs, monotonicNow } = this.deps;
    const now = monotonicNow();
    const decision = evaluateLease(this.snapshot, { lockDurationMs, fenceMarginMs: fenceMarginFor(killGraceMs) }, now);
    if (decision.action === 'fence') {
      this.fence = decision;
      this.stop();
      this.resolveFenced(decision);
      this.deps.onFence(decision);
      return;
    }
    if (!this.inFlight && now - this.lastSentAtMs >= renewEveryFor(lockDurationMs)) void this.renew();
  }

  private confirmRenewal(sentAtMs: number): void {
    this.snapshot = { ...this.snapshot, lastRenewalSentAtMs: Math.max(this.snapshot.lastRenewalSentAtMs, sentAtMs) };
    if (this.fence) return;
    this.isConfirmed = true;
    this.resolveConfirmed(true);
  }

  /** One extension; its send time counts only once Redis said yes. */
  private async renew(): Promise<void> {
    const { job, token, lockDurationMs, monotonicNow, log } = this.deps;
    this.inFlight = true;
    const sentAtMs = monotonicNow();
    this.lastSentAtMs = sentAtMs;
    try {
      const extended = await job.extendLock(token, lockDurationMs);
      if (extended === 0) {
        this.snapshot = { ...this.snapshot, lost: 'extend-refused' };
        this.tick();
        return;
      }
      this.confirmRenewal(sentAtMs);
    } catch (err) {
      // Unknown (Redis unreachable, a timeout): keep trying; the time rule fences if it lasts.
      log.warn({ err: String(err), event: 'lease.renew-failed' }, 'lease.renew-failed');
    } finally {
      this.inFlight = false;
    }
  }
}
