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
