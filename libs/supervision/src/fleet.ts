import type { BreakerStateName, Verdict } from '@lanes/contracts';
import { isInsideWindow } from './window.js';

export interface SlotVerdict {
  slot: string;
  verdict: Verdict;
  at: number;
}

export interface FleetView {
  breaker: BreakerStateName;
  recentVerdicts: readonly SlotVerdict[];
}

export interface FleetConfig {
  /** A slot's verdict counts while now − at < windowMs. */
  windowMs: number;
  /**
   * How many distinct slots must currently read provider-outage before the lane is called an
   * outage (besides being more than half of the reporting slots). Default 2: one slot's probe
   * failure is that slot's news, and the breaker already counts it.
   */
  minOutageSlots?: number;
}

export const DEFAULT_FLEET_MIN_OUTAGE_SLOTS = 2;

export interface FleetStatus {
  status: 'healthy' | 'degraded' | 'outage';
  /** Slots with a verdict inside the window, and how many of them read each bad verdict now. */
  reportingSlots: number;
  outageSlots: number;
  deadSlots: number;
  reason: string;
}

/**
 * The lane-level call, kept apart from single sandbox deaths. Each slot counts once, by its
 * LATEST verdict inside the window (now − at < windowMs; ties go to the later array entry), so a
 * slot that recovered no longer counts.
 * - outage: the breaker is open, or provider-outage slots are ≥ minOutageSlots AND > half the
 *   reporting slots.
 * - degraded: the breaker is half-open, or any slot currently reads sandbox-dead or provider-outage.
 *   sandbox-dead verdicts, however many, are NEVER an outage: each is a respawn, not a provider problem.
 * - healthy: otherwise (command-failed is the card's own business).
 */
export function evaluateFleet(lane: FleetView, config: FleetConfig, now: number): FleetStatus {
  const { windowMs } = config;
  const minOutageSlots = config.minOutageSlots ?? DEFAULT_FLEET_MIN_OUTAGE_SLOTS;
  const latest = new Map<string, SlotVerdict>();
  for (const v of lane.recentVerdicts) {
    if (!isInsideWindow(v.at, now, windowMs)) continue;
    const prev = latest.get(v.slot);
    if (prev === undefined || v.at >= prev.at) latest.set(v.slot, v);
  }
  const current = [...latest.values()];
  const reportingSlots = current.length;
  const outageSlots = current.filter((v) => v.verdict === 'provider-outage').length;
  const deadSlots = current.filter((v) => v.verdict === 'sandbox-dead').length;
  const counts = { reportingSlots, outageSlots, deadSlots };
  const tally = `${outageSlots} provider-outage, ${deadSlots} sandbox-dead of ${reportingSlots} reporting slots`;

  if (lane.breaker === 'open') return { status: 'outage', ...counts, reason: `breaker open; ${tally}` };
  if (outageSlots >= minOutageSlots && outageSlots * 2 > reportingSlots) {
    return { status: 'outage', ...counts, reason: `provider-outage dominates: ${tally}` };
  }
  if (lane.breaker === 'half-open') return { status: 'degraded', ...counts, reason: `breaker half-open; ${tally}` };
  if (outageSlots + deadSlots > 0) return { status: 'degraded', ...counts, reason: tally };
  return { status: 'healthy', ...counts, reason: `no provider-outage or sandbox-dead in ${windowMs} ms; ${reportingSlots} reporting slots` };
}
