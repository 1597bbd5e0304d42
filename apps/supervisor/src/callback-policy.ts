import type { EventType } from '@lanes/contracts';
import { isCallbackEvent } from '@lanes/queue';

/** The events a board hears about on its card's callbackUrl (one list, shared with the card script that queues them). */
export function isNotified(type: EventType): boolean {
  return isCallbackEvent(type);
}

export interface CallbackRetryConfig {
  maxAttempts: number;
  baseDelayMs: number;
}

/** Three tries, 1 s then 2 s apart: a board that is briefly down still hears; one that is gone does not hold the queue. */
export const DEFAULT_CALLBACK_RETRY: CallbackRetryConfig = { maxAttempts: 3, baseDelayMs: 1_000 };

export type CallbackDecision = { action: 'done'; reason: string } | { action: 'retry'; delayMs: number; reason: string } | { action: 'give-up'; reason: string };

/** What to do after one delivery attempt: 2xx is done; 4xx (but 408/429) is the board refusing, so give up; else retry. */
export function evaluateCallback(result: { status?: number; error?: string }, attempt: number, config: CallbackRetryConfig = DEFAULT_CALLBACK_RETRY): CallbackDecision {
  const { status } = result;
  if (status !== undefined && status >= 200 && status < 300) return { action: 'done', reason: `delivered (${status})` };
  const what = status !== undefined ? `HTTP ${status}` : `error: ${result.error ?? 'unknown'}`;
  if (status !== undefined && status >= 400 && status < 500 && status !== 408 && status !== 429) {
    return { action: 'give-up', reason: `${what}: the board refused it` };
  }
  if (attempt >= config.maxAttempts) return { action: 'give-up', reason: `${what} after ${attempt} attempts` };
  return { action: 'retry', delayMs: config.baseDelayMs * 2 ** (attempt - 1), reason: `${what}: retry ${attempt + 1}/${config.maxAttempts}` };
}

export interface CallbackConcurrencyConfig {
  /** Deliveries in flight to one host (scheme, name and port) at once: a host that never answers ties up only these. */
  maxInFlightPerHost: number;
  /**
   * Deliveries in flight for the cards of one lane. Each lane is a board's, which chooses its
   * cards' callbackUrls: one that blackholes many hosts ties up this many, never the whole total.
   */
  maxInFlightPerLane: number;
  /** Deliveries in flight in total. */
  maxInFlight: number;
}

/**
 * Four per host, as a browser's six per origin, a little fewer: a board that answers is not
 * flooded, and one that blackholes holds four connections for their 5 s timeouts while every other
 * host goes on. A quarter of the total per lane: a board that points its cards at many such hosts
 * leaves the rest to the other boards. 64 in total keeps sockets and memory small on one supervisor.
 */
export const DEFAULT_CALLBACK_CONCURRENCY: CallbackConcurrencyConfig = { maxInFlightPerHost: 4, maxInFlightPerLane: 16, maxInFlight: 64 };

/** A delivery read from the stream: its entry id, the host it goes to, and its card and the card's lane. */
export interface DeliverySlot {
  id: string;
  host: string;
  cardId: string;
  lane: string;
}

export interface DeliverySnapshot {
  /** Read and waiting, per host, each in stream order. */
  queued: ReadonlyMap<string, readonly DeliverySlot[]>;
  /** In flight (trying, or waiting between tries). */
  active: readonly DeliverySlot[];
}

/**
 * Which waiting deliveries start now. One starts when the total, its host and its lane are under
 * their bounds and its card has nothing in flight or waiting ahead of it: a card's events reach
 * its board in the order they happened, while other cards, hosts and lanes go on around a slow
 * one. A host at its bound costs one lookup, however much waits for it.
 */
export function selectDeliveries(snapshot: DeliverySnapshot, config: CallbackConcurrencyConfig = DEFAULT_CALLBACK_CONCURRENCY): string[] {
  const perHost = new Map<string, number>();
  const perLane = new Map<string, number>();
  const busyCards = new Set<string>();
  for (const a of snapshot.active) {
    perHost.set(a.host, (perHost.get(a.host) ?? 0) + 1);
    perLane.set(a.lane, (perLane.get(a.lane) ?? 0) + 1);
    busyCards.add(a.cardId);
  }
  let total = snapshot.active.length;
  const start: string[] = [];
  for (const [host, queue] of snapshot.queued) {
    let room = config.maxInFlightPerHost - (perHost.get(host) ?? 0);
    for (const q of queue) {
      if (room <= 0 || total >= config.maxInFlight) break;
      const free = !busyCards.has(q.cardId);
      // Seen once, the card is busy for every later entry: started or not, this one goes first.
      busyCards.add(q.cardId);
      if (!free) continue;
      const inLane = perLane.get(q.lane) ?? 0;
      // A lane at its bound leaves this delivery waiting, and the card's later ones behind it.
      if (inLane >= config.maxInFlightPerLane) continue;
      perLane.set(q.lane, inLane + 1);
      start.push(q.id);
      room--;
      total++;
    }
  }
  return start;
}
