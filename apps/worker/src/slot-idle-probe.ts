import type { Logger } from 'pino';
import type { LaneConfig, ObservedExitCode } from '@lanes/contracts';
import { errorKind, runCanary } from '@lanes/runner';
import type { SandboxHandle } from '@lanes/sandbox';
import { evaluateIdleCanary, evaluateIdleProbe, type CanaryReading, type IdleProbeFinding } from '@lanes/supervision';
import type { LaneBreaker } from './lane-breaker.js';
import type { SlotStateName } from './slot-state.js';

/** The narrow view of a slot its idle probe needs. */
export interface IdleProbeTarget {
  readonly handle: SandboxHandle | undefined;
  readonly state: SlotStateName;
  readonly cardId: string | undefined;
  markDead(observedExitCode: ObservedExitCode, reason: string): void;
}

export interface SlotIdleProbeDeps {
  slot: IdleProbeTarget;
  breaker: LaneBreaker;
  lane: LaneConfig;
  newNonce: () => string;
  log: Logger;
}

/**
 * One slot's probing between cards: a poll of its idle live sandbox (so a death between cards
 * costs no card an infra retry) and, while the breaker is not closed, the breaker's canary on it.
 * A bounded run of failed canaries (see evaluateIdleCanary) marks the sandbox dead.
 */
export class SlotIdleProbe {
  /** Canaries the current sandbox failed in a row. */
  private failedCanaries = 0;
  /** The probe in flight, if any (see probe). */
  private inFlight: Promise<void> | undefined;

  constructor(private readonly deps: SlotIdleProbeDeps) {}

  /** A probe is out on the sandbox: the slot is not idle enough to be removed. */
  get probing(): boolean {
    return this.inFlight !== undefined;
  }

  /** A new sandbox starts with a clean canary record. */
  reset(): void {
    this.failedCanaries = 0;
  }

  /**
   * Starts a probe unless the previous one is still out: a poll that hangs holds this slot's probe
   * only (until its call deadline), never the lane's or the worker's.
   */
  probe(): Promise<void> {
    return (this.inFlight ??= this.check().finally(() => (this.inFlight = undefined)));
  }

  /** Polls the sandbox of an idle live slot and acts on the finding. */
  async check(): Promise<void> {
    const { slot } = this.deps;
    const handle = slot.handle;
    if (slot.state !== 'live' || !handle || slot.cardId !== undefined) return;
    const finding: IdleProbeFinding = await handle.poll().then(
      (poll) => ({ kind: 'polled' as const, poll }),
      (err: unknown) => ({ kind: 'probe-failed' as const, error: errorKind(err), message: String(err) }),
    );
    const decision = evaluateIdleProbe(finding);
    switch (decision.action) {
      case 'keep':
        // Live (or unknown). While the breaker is not closed, an idle live sandbox is how the lane
        // probes the provider: no create is needed for the breaker to learn it is back.
        if (finding.kind === 'polled' && this.deps.breaker.state.state !== 'closed') await this.canary(handle);
        return;
      case 'mark-dead':
        // A card may have taken the slot while the poll was out; then the card's own run decides.
        if (this.idleWith(handle)) slot.markDead(decision.observedExitCode, decision.reason);
    }
  }

  /**
   * A card's probe canary on this sandbox, run after the poll said live, that did not answer: it
   * counts with the idle canaries. Without it, a card re-driven at every half-open takes the slot
   * before any idle canary can, and a sandbox whose exec channel is broken is never condemned.
   * (The card's run already told the breaker.)
   */
  countCardCanary(handle: SandboxHandle, reading: CanaryReading): void {
    const { slot, log } = this.deps;
    if (slot.handle !== handle || slot.state !== 'live') return;
    const decision = evaluateIdleCanary(this.failedCanaries, reading);
    this.failedCanaries = decision.failedCanaries;
    log.info({ event: 'sandbox.card-canary', sandboxId: handle.id, action: decision.action, reason: decision.reason }, 'sandbox.card-canary');
    if (decision.action === 'mark-dead') slot.markDead('unknown', decision.reason);
  }

  private idleWith(handle: SandboxHandle): boolean {
    const { slot } = this.deps;
    return slot.handle === handle && slot.cardId === undefined && slot.state === 'live';
  }

  /** The breaker's probe on an idle live sandbox. */
  private async canary(handle: SandboxHandle): Promise<void> {
    const { breaker, lane, newNonce, log, slot } = this.deps;
    if (!this.idleWith(handle)) return;
    const gate = await breaker.gate();
    if (gate.action === 'wait') return;
    // This canary now holds the half-open probe lease: it runs even if a card took the slot while
    // the breaker was asked (it queues behind the card's command; its deadline counts from its own
    // start). Bailing out here would leave the lease held and the breaker half-open until it lapses.
    const reading = await runCanary(handle, { newNonce, canaryTimeoutMs: lane.canaryTimeoutMs });
    const decision = evaluateIdleCanary(this.failedCanaries, reading);
    this.failedCanaries = decision.failedCanaries;
    log.info({ event: 'sandbox.idle-canary', sandboxId: handle.id, action: decision.action, reason: decision.reason }, 'sandbox.idle-canary');
    switch (decision.action) {
      case 'passed':
        await breaker.canaryPassed();
        return;
      case 'count':
        if (decision.breakerFailure) await breaker.failure(decision.reason);
        return;
      case 'mark-dead':
        if (decision.breakerFailure) await breaker.failure(decision.reason);
        if (this.idleWith(handle)) slot.markDead('unknown', decision.reason);
    }
  }
}
