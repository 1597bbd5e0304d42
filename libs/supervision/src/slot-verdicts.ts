import type { LaneEvent, Verdict } from '@lanes/contracts';
import type { SlotVerdict } from './fleet.js';

/** The parts of a lane event that say something about a slot's verdict. */
export type VerdictEvent = Pick<LaneEvent, 'type' | 'at' | 'lane' | 'slot' | 'data'>;

/**
 * The verdicts a lane's events imply, per slot, for `evaluateFleet`: `sandbox.dead` reads
 * sandbox-dead, a card blocked for provider-outage reads provider-outage, and a sandbox going
 * live, respawning or a card finishing reads ok. Other events say nothing about the slot's health.
 */
export function slotVerdictsOf(events: readonly VerdictEvent[], lane: string): SlotVerdict[] {
  const out: SlotVerdict[] = [];
  for (const e of events) {
    if (e.lane !== lane || !e.slot) continue;
    const verdict = verdictOf(e);
    if (verdict) out.push({ slot: e.slot, verdict, at: Date.parse(e.at) });
  }
  return out;
}

function verdictOf(e: VerdictEvent): Verdict | undefined {
  switch (e.type) {
    case 'sandbox.dead':
      return 'sandbox-dead';
    case 'card.blocked':
      return e.data?.blockedReason === 'provider-outage' ? 'provider-outage' : undefined;
    case 'sandbox.live':
    case 'sandbox.respawned':
    case 'card.done':
      return 'ok';
    default:
      return undefined;
  }
}
