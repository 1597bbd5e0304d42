import { describe, expect, it } from 'vitest';
import { ConfigError } from '@lanes/contracts';
import { evaluateLease, fenceMarginFor, type LeaseSnapshot } from '../src/index.js';
import { assertLeaseFits, FENCE_SLACK_MS, LEASE_TICK_MS } from '../src/lease.js';

/** Monotonic ms; the last confirmed renewal was sent at T. Lock 4 s, margin 1 s: fence from T + 3000. */
const T = 50_000;
const config = { lockDurationMs: 4_000, fenceMarginMs: 1_000 };

describe('evaluateLease', () => {
  it.each<[string, LeaseSnapshot, number, string, string?]>([
    ['renewed just now', { lastRenewalSentAtMs: T }, T, 'hold'],
    ['1 ms before the fence', { lastRenewalSentAtMs: T }, T + 2_999, 'hold'],
    ['at the fence (lock 4 s − margin 1 s)', { lastRenewalSentAtMs: T }, T + 3_000, 'fence', 'renewal-overdue'],
    ['Redis away longer than the lock', { lastRenewalSentAtMs: T }, T + 6_000, 'fence', 'renewal-overdue'],
    ['BullMQ said the lock could not be renewed', { lastRenewalSentAtMs: T, lost: 'lock-renewal-failed' }, T + 1, 'fence', 'lock-renewal-failed'],
    ['an extension answered 0 (job not active under our token)', { lastRenewalSentAtMs: T, lost: 'extend-refused' }, T, 'fence', 'extend-refused'],
  ])('%s → %s', (_name, snapshot, now, action, cause) => {
    const d = evaluateLease(snapshot, config, now);
    expect(d.action).toBe(action);
    if (d.action === 'fence') expect(d.cause).toBe(cause);
    else expect(d.fenceAtMs).toBe(T + 3_000);
    expect(d.reason).toBeTruthy();
  });

  it('the margin covers the whole kill escalation (SIGINT, SIGTERM, SIGKILL), one tick and slack', () => {
    expect(fenceMarginFor(500)).toBe(1_000 + LEASE_TICK_MS + FENCE_SLACK_MS);
  });

  it.each([
    [30_000, 500, true],
    [4_000, 500, true],
    [2_000, 500, false],
    [1_500, 100, true],
    [1_500, 500, false],
  ])('lock %i ms with killGrace %i ms fits: %s', (lockMs, graceMs, fits) => {
    const check = () => assertLeaseFits('l', lockMs, graceMs);
    if (fits) expect(check).not.toThrow();
    else expect(check).toThrow(ConfigError);
  });
});
