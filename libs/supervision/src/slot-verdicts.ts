import type { LaneEvent, Verdict } from '@lanes/contracts';
import type { SlotVerdict } from './fleet.js';

/** The parts of a lane event that say something about a slot's verdict. */
export type VerdictEvent = Pick<LaneEvent, 'type' | 'at' | 'lane' | 'slot' | 'data'>;

/**
 * Each event's slot verdict (null: it says nothing), kept by a caller that reads the same events
 * again: the supervisor's window holds up to thousands of events from sweep to sweep, and parsing
 * their times again on every sweep was a stall of several ms each time.
 */
export type VerdictMemo = WeakMap<VerdictEvent, SlotVerdict | null>;

/**
 * The verdicts a lane's events imply, per slot, for `evaluateFleet`: `sandbox.dead` reads
 * sandbox-dead, a card blocked for provider-outage reads provider-outage, and a sandbox going
 * live, respawning or a card finishing reads ok. Other events say nothing about the slot's health.
 * With a memo, each event is worked out once.
 */
export function slotVerdictsOf(events: readonly VerdictEvent[], lane: string, memo?: VerdictMemo): SlotVerdict[] {
  const out: SlotVerdict[] = [];
  for (const e of events) {
    if (e.lane !== lane || !e.slot) continue;
    let found = memo?.get(e);
    if (found === undefined) {
      const verdict = verdictOf(e);
      found = verdict ? { slot: e.slot, verdict, at: Date.parse(e.at) } : null;
      memo?.set(e, found);
    }
    if (found) out.push(found);
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
