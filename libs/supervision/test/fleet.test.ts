import { describe, expect, it } from 'vitest';
import type { BreakerStateName, Verdict } from '@lanes/contracts';
import { DEFAULT_FLEET_MIN_OUTAGE_SLOTS, evaluateFleet, type SlotVerdict } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const WINDOW_MS = 60_000;
const v = (slot: string, verdict: Verdict, at = NOW - 1): SlotVerdict => ({ slot, verdict, at });

describe('evaluateFleet', () => {
  it('defaults to two slots before a verdict-based outage', () => {
    expect(DEFAULT_FLEET_MIN_OUTAGE_SLOTS).toBe(2);
  });

  it.each<[string, BreakerStateName, SlotVerdict[], 'healthy' | 'degraded' | 'outage']>([
    ['nothing reported', 'closed', [], 'healthy'],
    ['all ok', 'closed', [v('0', 'ok'), v('1', 'ok')], 'healthy'],
    ['command failures are the cards’ business', 'closed', [v('0', 'command-failed'), v('1', 'command-failed')], 'healthy'],
    ['breaker open with no verdicts', 'open', [], 'outage'],
    ['breaker open, all ok', 'open', [v('0', 'ok')], 'outage'],
    ['breaker half-open', 'half-open', [v('0', 'ok')], 'degraded'],
    ['one sandbox death', 'closed', [v('0', 'sandbox-dead'), v('1', 'ok')], 'degraded'],
    ['every slot dead: still never an outage', 'closed', [v('0', 'sandbox-dead'), v('1', 'sandbox-dead'), v('2', 'sandbox-dead')], 'degraded'],
    ['many deaths of one slot: never an outage', 'closed', [v('0', 'sandbox-dead', NOW - 3), v('0', 'sandbox-dead', NOW - 2), v('0', 'sandbox-dead', NOW - 1)], 'degraded'],
    ['one slot provider-outage of one: below min slots', 'closed', [v('0', 'provider-outage')], 'degraded'],
    ['2 of 3 slots provider-outage: dominates', 'closed', [v('0', 'provider-outage'), v('1', 'provider-outage'), v('2', 'ok')], 'outage'],
    ['2 of 4 slots: exactly half does not dominate', 'closed', [v('0', 'provider-outage'), v('1', 'provider-outage'), v('2', 'ok'), v('3', 'ok')], 'degraded'],
    ['3 of 5 slots: dominates', 'closed', [v('0', 'provider-outage'), v('1', 'provider-outage'), v('2', 'provider-outage'), v('3', 'ok'), v('4', 'sandbox-dead')], 'outage'],
    ['half-open with outage dominating: outage', 'half-open', [v('0', 'provider-outage'), v('1', 'provider-outage')], 'outage'],
    ['one slot repeating provider-outage counts once', 'closed', [v('0', 'provider-outage', NOW - 2), v('0', 'provider-outage', NOW - 1)], 'degraded'],
    ['a recovered slot counts by its latest verdict', 'closed', [v('0', 'provider-outage', NOW - 10), v('1', 'provider-outage', NOW - 10), v('0', 'ok', NOW - 1)], 'degraded'],
    ['latest verdict wins regardless of array order', 'closed', [v('0', 'ok', NOW - 1), v('0', 'provider-outage', NOW - 10), v('1', 'provider-outage')], 'degraded'],
    // window boundary: inside while now − at < windowMs
    ['outage verdicts 1 ms inside the window', 'closed', [v('0', 'provider-outage', NOW - WINDOW_MS + 1), v('1', 'provider-outage', NOW - WINDOW_MS + 1)], 'outage'],
    ['outage verdicts exactly windowMs old: aged out', 'closed', [v('0', 'provider-outage', NOW - WINDOW_MS), v('1', 'provider-outage', NOW - WINDOW_MS)], 'healthy'],
    ['outage verdicts 1 ms past the window', 'closed', [v('0', 'provider-outage', NOW - WINDOW_MS - 1), v('1', 'provider-outage', NOW - WINDOW_MS - 1)], 'healthy'],
  ])('%s → %s', (_name, breaker, recentVerdicts, status) => {
    const r = evaluateFleet({ breaker, recentVerdicts }, { windowMs: WINDOW_MS }, NOW);
    expect(r.status).toBe(status);
    expect(r.reason).toBeTruthy();
  });

  it('minOutageSlots 1 lets a single-slot lane call an outage', () => {
    const r = evaluateFleet({ breaker: 'closed', recentVerdicts: [v('0', 'provider-outage')] }, { windowMs: WINDOW_MS, minOutageSlots: 1 }, NOW);
    expect(r.status).toBe('outage');
  });

  it('reports the per-slot tally', () => {
    const r = evaluateFleet({ breaker: 'closed', recentVerdicts: [v('0', 'provider-outage'), v('1', 'sandbox-dead'), v('2', 'ok'), v('2', 'ok')] }, { windowMs: WINDOW_MS }, NOW);
    expect(r).toMatchObject({ reportingSlots: 3, outageSlots: 1, deadSlots: 1, status: 'degraded' });
  });
});
