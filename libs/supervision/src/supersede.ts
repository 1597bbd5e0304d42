import { supersededReason } from '@lanes/contracts';

/**
 * One run per PR (libs/contracts supersede.ts): as a card with a `supersedeKey` is admitted to run,
 * whether it is still its key's newest card. An arrival cancels its predecessor at once
 * (LaneQueues.supersede); this check is what holds when that cancel was lost (the API crashed in
 * between) or could not apply (the card was just being taken). Pure: the worker reads the key's
 * newest card and carries out the decision.
 */
export type SupersedeDecision = { action: 'run'; reason: string } | { action: 'cancel'; by: string; reason: string };

/**
 * | the key's newest card      | decision                   |
 * |----------------------------|----------------------------|
 * | none (forgotten after TTL) | run                        |
 * | this card                  | run                        |
 * | another card               | cancel, superseded by it   |
 */
export function evaluateSupersede(s: { self: string; latest: string | undefined }): SupersedeDecision {
  if (s.latest === undefined) return { action: 'run', reason: 'no newer card of its key is known' };
  if (s.latest === s.self) return { action: 'run', reason: "it is its key's newest card" };
  return { action: 'cancel', by: s.latest, reason: supersededReason(s.latest) };
}
