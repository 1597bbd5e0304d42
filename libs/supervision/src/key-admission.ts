/**
 * Fair per-key concurrency (README "Configuration", `concurrencyKey` and `maxRunningPerKey`): the
 * admission of a card whose key may be at its limit. Pure: the Lua in libs/queue key-limit-script.ts
 * reads the snapshot and carries out the decision in the same atomic step, and its test runs this
 * table against it.
 */
export interface KeyAdmissionSnapshot {
  /** BullMQ's lock of the card's job, as the taking run sees it: the fence, as for the move to running. */
  lock: 'this-run' | 'another-run' | 'none';
  /** This card is in its key's running set already: its own earlier run, taken over after a crash. */
  counted: boolean;
  /**
   * Other cards of the key counted running: members of the key's running set whose job lock is
   * held by some run. A member whose lock is gone (its worker crashed, the job was handed on or
   * finished) runs nowhere and is not counted; the script drops it from the set.
   */
  runningOthers: number;
}

export interface KeyAdmissionConfig {
  /** The lane's `maxRunningPerKey`. */
  maxRunningPerKey: number;
  /**
   * A parked card is woken by the end of a card of its key; should that wake be lost (the ending
   * worker crashed in between), its delayed job comes due after this and asks again. 30 s: the
   * default lock duration, the time a crash already takes to be noticed.
   */
  parkBackstopMs: number;
}

export const DEFAULT_KEY_PARK_BACKSTOP_MS = 30_000;

export type KeyAdmissionDecision =
  | { action: 'admit'; reason: string }
  /** Over the limit: the job goes to delayed until `retryAt` (or an earlier wake) and its slot is released at once. */
  | { action: 'park'; retryAt: number; reason: string }
  /** The run does not hold the job: it neither runs nor parks it. */
  | { action: 'stale'; reason: string };

/**
 * | lock        | counted already | others running vs the limit | decision |
 * |-------------|-----------------|-----------------------------|----------|
 * | another/none| any             | any                         | stale    |
 * | this run    | yes             | any                         | admit    |
 * | this run    | no              | others < max                | admit    |
 * | this run    | no              | others ≥ max                | park     |
 */
export function evaluateKeyAdmission(s: KeyAdmissionSnapshot, config: KeyAdmissionConfig, nowMs: number): KeyAdmissionDecision {
  if (s.lock !== 'this-run') return { action: 'stale', reason: s.lock === 'none' ? 'the lock lapsed before admission' : 'another run holds the lock' };
  if (s.counted) return { action: 'admit', reason: 'its own earlier run is counted already (a takeover)' };
  if (hasKeyRoom(s.runningOthers, config.maxRunningPerKey)) return { action: 'admit', reason: `${s.runningOthers} of ${config.maxRunningPerKey} running` };
  return { action: 'park', retryAt: nowMs + config.parkBackstopMs, reason: `key at its limit (${s.runningOthers} of ${config.maxRunningPerKey} running)` };
}

/** Whether one more card of a key may run: the test the admission and a parked card's recheck share. */
export function hasKeyRoom(runningOthers: number, maxRunningPerKey: number): boolean {
  return runningOthers < maxRunningPerKey;
}
