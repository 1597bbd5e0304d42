import type { EventType } from '@lanes/contracts';

/** The events a board hears about on its card's callbackUrl: the end of a card, or a wait for a person. */
export const CALLBACK_EVENT_TYPES: ReadonlySet<EventType> = new Set<EventType>(['card.done', 'card.failed', 'card.cancelled', 'card.blocked']);

export function isCallbackEvent(type: EventType): boolean {
  return CALLBACK_EVENT_TYPES.has(type);
}
