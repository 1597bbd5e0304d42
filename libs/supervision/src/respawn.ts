import { defaults, type RespawnConfig } from '@lanes/contracts';
import { pruneWindow } from './window.js';

/** Deaths of one slot's sandboxes (ms timestamps), as stored between decisions. */
export interface DeathHistory {
  deaths: number[];
}

/** DESIGN defaults: 250 ms base, 30 s cap, deaths older than 5 min forgotten. */
export const DEFAULT_RESPAWN_CONFIG: RespawnConfig = {
  baseDelayMs: defaults.DEFAULT_RESPAWN_BASE_DELAY_MS,
  maxDelayMs: defaults.DEFAULT_RESPAWN_MAX_DELAY_MS,
  windowMs: defaults.DEFAULT_RESPAWN_WINDOW_MS,
};

export type RespawnDecision = { action: 'respawn'; delayMs: 0; reason: string } | { action: 'wait'; delayMs: number; until: number; reason: string };

/**
 * Backoff owed after `n` deaths inside the window (the latest one included):
 *   n ≤ 1 → 0;  n ≥ 2 → min(maxDelayMs, baseDelayMs × 2^(n−2)).
 * Equivalently base × 2^(earlier deaths − 1), as `defaults.ts` puts it.
 * With the defaults: 0, 250, 500, 1000, …, capped at 30 000 ms from the 9th death on.
 */
export function respawnBackoffMs(n: number, config: RespawnConfig): number {
  if (n <= 1) return 0;
  const exponent = Math.min(n - 2, 52); // 2^52 already exceeds any cap; avoids Infinity (and 0 × Infinity)
  return Math.min(config.maxDelayMs, config.baseDelayMs * 2 ** exponent);
}

/**
 * When may the slot respawn? Call after `recordDeath`. Backoff counts the deaths inside
 * `windowMs` (an event at t is inside while now − t < windowMs) and runs from the LATEST death:
 * until = latestDeath + respawnBackoffMs(n). So the decision is the same whenever it is re-evaluated:
 * now ≥ until → respawn now; otherwise wait until − now.
 */
export function evaluateRespawn(history: DeathHistory, config: RespawnConfig, now: number): RespawnDecision {
  const deaths = pruneWindow(history.deaths, now, config.windowMs);
  const n = deaths.length;
  const latest = deaths[n - 1];
  const backoffMs = respawnBackoffMs(n, config);
  if (latest === undefined) return { action: 'respawn', delayMs: 0, reason: `no deaths within ${config.windowMs} ms: respawn now` };
  if (backoffMs === 0) return { action: 'respawn', delayMs: 0, reason: `death ${n} within ${config.windowMs} ms: respawn now` };
  const until = latest + backoffMs;
  if (now >= until) {
    return { action: 'respawn', delayMs: 0, reason: `death ${n} within ${config.windowMs} ms: backoff ${backoffMs} ms already served` };
  }
  return {
    action: 'wait',
    delayMs: until - now,
    until,
    reason: `death ${n} within ${config.windowMs} ms: backoff ${backoffMs} ms, respawn at ${until}`,
  };
}

/**
 * Appends a death at `now` and drops deaths that fell out of the window (same convention as
 * evaluateRespawn). A state update, not a decision, so it returns the new history only.
 * Never mutates its input.
 */
export function recordDeath(history: DeathHistory, now: number, config: RespawnConfig): DeathHistory {
  return { deaths: [...pruneWindow(history.deaths, now, config.windowMs), now] };
}
