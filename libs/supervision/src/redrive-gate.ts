import type { BreakerStateName, LivenessVerdict, SlotStatus } from '@lanes/contracts';
import { livenessOf } from './liveness.js';

export interface RedriveGateSnapshot {
  breaker: BreakerStateName;
  slots: readonly SlotStatus[];
  /** The supervisor's liveness verdicts, by worker. */
  liveness: Readonly<Record<string, LivenessVerdict>>;
}

export type RedriveGateDecision = { action: 'open'; reason: string } | { action: 'hold'; reason: string };

/**
 * Whether the supervisor's sweep may re-drive a lane's blocked cards (ones a worker blocked and
 * died before re-driving): only with the breaker closed and a live sandbox in a slot of a worker
 * whose liveness verdict is `alive`. Unknown holds: a re-drive onto a worker nobody has seen beat
 * would only strand the card again.
 */
export function evaluateRedriveGate(snapshot: RedriveGateSnapshot): RedriveGateDecision {
  if (snapshot.breaker !== 'closed') return { action: 'hold', reason: `breaker ${snapshot.breaker}` };
  const live = snapshot.slots.find((s) => s.sandbox?.state === 'live' && livenessOf(snapshot.liveness, s.worker) === 'alive');
  if (!live) return { action: 'hold', reason: 'no live sandbox in a slot of an alive worker' };
  return { action: 'open', reason: `slot ${live.worker}/${live.slot} has live sandbox ${live.sandbox!.id}` };
}
