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

/** What each event type that speaks of a slot's health says; any other type says nothing. */
const VERDICT_OF: Partial<Record<VerdictEvent['type'], (e: VerdictEvent) => Verdict | undefined>> = {
  'sandbox.dead': () => 'sandbox-dead',
  'card.blocked': (e) => (e.data?.blockedReason === 'provider-outage' ? 'provider-outage' : undefined),
  'sandbox.live': () => 'ok',
  'sandbox.respawned': () => 'ok',
  'card.done': () => 'ok',
};

/** The event types `slotVerdictsOf` reads: a reader of the event stream for it may skip the rest undecoded. */
export const VERDICT_EVENT_TYPES: ReadonlySet<string> = new Set(Object.keys(VERDICT_OF));

function verdictOf(e: VerdictEvent): Verdict | undefined {
  return VERDICT_OF[e.type]?.(e);
}
