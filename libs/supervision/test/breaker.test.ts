import { describe, expect, it } from 'vitest';
import { defaults, type BreakerConfig } from '@lanes/contracts';
import { DEFAULT_BREAKER_CONFIG, INITIAL_BREAKER, breakerOnCanaryPassed, breakerOnFailure, breakerOnTick, evaluateCreate, type BreakerSnapshot } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const CFG: BreakerConfig = { failureThreshold: 3, windowMs: 1_000, openMs: 500 };

const closed = (failures: number[] = []): BreakerSnapshot => ({ state: 'closed', failures, probeInFlight: false });
const openUntil = (retryAt: number, failures: number[] = []): BreakerSnapshot => ({
  state: 'open',
  failures,
  openedAt: retryAt - CFG.openMs,
  retryAt,
  probeInFlight: false,
});
const halfOpen = (probeInFlight: boolean, retryAt = NOW - 1): BreakerSnapshot => ({
  state: 'half-open',
  failures: [],
  openedAt: retryAt - CFG.openMs,
  retryAt,
  probeInFlight,
});

describe('breaker defaults', () => {
  it('come from contracts', () => {
    expect(DEFAULT_BREAKER_CONFIG).toEqual({
      failureThreshold: defaults.DEFAULT_BREAKER_FAILURE_THRESHOLD,
      windowMs: defaults.DEFAULT_BREAKER_WINDOW_MS,
      openMs: defaults.DEFAULT_BREAKER_OPEN_MS,
    });
    expect(INITIAL_BREAKER).toEqual({ state: 'closed', failures: [], probeInFlight: false });
  });
});

describe('breakerOnFailure', () => {
  it.each<[string, number[], 'closed' | 'open', number]>([
    ['first failure', [], 'closed', 1],
    ['threshold − 1 inside the window stays closed', [NOW - 10], 'closed', 2],
    ['threshold inside the window opens', [NOW - 20, NOW - 10], 'open', 3],
    // window boundary on the oldest failure: inside while now − t < windowMs
    ['oldest at now − windowMs + 1 still counts → opens', [NOW - CFG.windowMs + 1, NOW - 10], 'open', 3],
    ['oldest at exactly now − windowMs aged out → closed', [NOW - CFG.windowMs, NOW - 10], 'closed', 2],
    ['oldest at now − windowMs − 1 aged out → closed', [NOW - CFG.windowMs - 1, NOW - 10], 'closed', 2],
    ['many old failures do not add up', [NOW - 5_000, NOW - 4_000, NOW - 3_000, NOW - 2_000], 'closed', 1],
  ])('closed: %s', (_name, failures, state, kept) => {
    const r = breakerOnFailure(closed(failures), CFG, NOW);
    expect(r.snapshot.state).toBe(state);
    expect(r.snapshot.failures).toHaveLength(kept);
    expect(r.snapshot.failures.at(-1)).toBe(NOW);
    if (state === 'open') {
      expect(r.transition).toBe('opened');
      expect(r.snapshot.openedAt).toBe(NOW);
      expect(r.snapshot.retryAt).toBe(NOW + CFG.openMs);
    } else {
      expect(r.transition).toBeUndefined();
    }
    expect(r.reason).toBeTruthy();
  });

  it('half-open: a failure re-opens with retryAt = now + openMs', () => {
    const r = breakerOnFailure(halfOpen(true), CFG, NOW);
    expect(r.transition).toBe('opened');
    expect(r.snapshot).toMatchObject({ state: 'open', openedAt: NOW, retryAt: NOW + CFG.openMs, probeInFlight: false });
  });

  it('open: a late failure is recorded but does not push retryAt', () => {
    const s = openUntil(NOW + 100, [NOW - 50]);
    const r = breakerOnFailure(s, CFG, NOW);
    expect(r.transition).toBeUndefined();
    expect(r.snapshot).toMatchObject({ state: 'open', retryAt: NOW + 100, failures: [NOW - 50, NOW] });
  });

  it('does not mutate its input', () => {
    const s = closed([NOW - 20, NOW - 10]);
    const copy = structuredClone(s);
    breakerOnFailure(s, CFG, NOW);
    expect(s).toEqual(copy);
  });
});

describe('breakerOnTick', () => {
  it.each<[string, BreakerSnapshot, number, BreakerSnapshot['state'], string | undefined]>([
    ['open, 1 ms before retryAt', openUntil(NOW + 1), NOW, 'open', undefined],
    ['open, at retryAt', openUntil(NOW), NOW, 'half-open', 'half-open'],
    ['open, 1 ms after retryAt', openUntil(NOW - 1), NOW, 'half-open', 'half-open'],
    ['open without retryAt is due (never strand work)', { state: 'open', failures: [], probeInFlight: false }, NOW, 'half-open', 'half-open'],
    ['closed stays closed', closed([NOW - 10]), NOW, 'closed', undefined],
    ['half-open without probe stays half-open', halfOpen(false), NOW, 'half-open', undefined],
  ])('%s', (_name, s, now, state, transition) => {
    const r = breakerOnTick(s, CFG, now);
    expect(r.snapshot.state).toBe(state);
    expect(r.transition).toBe(transition);
    expect(r.reason).toBeTruthy();
  });

  it('prunes aged failures', () => {
    const r = breakerOnTick(closed([NOW - CFG.windowMs, NOW - CFG.windowMs + 1]), CFG, NOW);
    expect(r.snapshot.failures).toEqual([NOW - CFG.windowMs + 1]);
  });

  it.each<[string, number, boolean]>([
    ['1 ms before the lease ends', NOW + 1, true],
    ['at the lease end', NOW, false],
    ['1 ms after the lease end', NOW - 1, false],
  ])('half-open probe lease: %s → probeInFlight %s', (_name, retryAt, inFlight) => {
    const r = breakerOnTick(halfOpen(true, retryAt), CFG, NOW);
    expect(r.snapshot.state).toBe('half-open');
    expect(r.snapshot.probeInFlight).toBe(inFlight);
    expect(r.transition).toBeUndefined();
  });
});

describe('breakerOnCanaryPassed: the only reset', () => {
  it.each<[string, BreakerSnapshot, string | undefined]>([
    ['from open', openUntil(NOW + 400, [NOW - 1, NOW - 2, NOW - 3]), 'closed'],
    ['from half-open with the probe in flight', halfOpen(true), 'closed'],
    ['from closed: clears failures, no transition', closed([NOW - 2, NOW - 1]), undefined],
  ])('%s', (_name, s, transition) => {
    const r = breakerOnCanaryPassed(s, NOW);
    expect(r.snapshot).toEqual({ state: 'closed', failures: [], probeInFlight: false });
    expect(r.transition).toBe(transition);
  });

  it('nothing else closes an open breaker or clears failures (a successful create is not a reset)', () => {
    // Walk a breaker through failures and ticks only: it never returns to closed and never forgets
    // failures that are still inside the window.
    let s: BreakerSnapshot = INITIAL_BREAKER;
    for (let i = 0; i < CFG.failureThreshold; i++) s = breakerOnFailure(s, CFG, NOW + i).snapshot;
    expect(s.state).toBe('open');
    for (const t of [NOW + 10, NOW + 600, NOW + 5_000]) {
      s = breakerOnTick(s, CFG, t).snapshot;
      expect(s.state).not.toBe('closed');
      const d = evaluateCreate(s, CFG, t);
      expect(d.action).not.toBe('create');
      s = d.snapshot;
    }
    // evaluateCreate granted a probe; the create "succeeded", but without a canary it stays half-open.
    expect(s.state).toBe('half-open');
  });
});

describe('evaluateCreate', () => {
  it.each<[string, BreakerSnapshot, 'create' | 'probe' | 'wait', number | undefined]>([
    ['closed → create', closed(), 'create', undefined],
    ['closed with failures → create', closed([NOW - 1, NOW - 2]), 'create', undefined],
    ['open, 1 ms before retryAt → wait', openUntil(NOW + 1), 'wait', NOW + 1],
    ['open, well before retryAt → wait until retryAt', openUntil(NOW + 400), 'wait', NOW + 400],
    ['open, at retryAt → probe (implied tick)', openUntil(NOW), 'probe', undefined],
    ['open, 1 ms after retryAt → probe', openUntil(NOW - 1), 'probe', undefined],
    ['half-open, no probe → probe', halfOpen(false), 'probe', undefined],
    ['half-open, probe in flight, lease 1 ms left → wait', halfOpen(true, NOW + 1), 'wait', NOW + 1],
    ['half-open, probe lease ended → probe again', halfOpen(true, NOW), 'probe', undefined],
  ])('%s', (_name, s, action, retryAt) => {
    const d = evaluateCreate(s, CFG, NOW);
    expect(d.action).toBe(action);
    if (d.action === 'wait') {
      expect(d.retryAt).toBe(retryAt);
      expect(d.retryAt).toBeGreaterThan(NOW);
    }
    if (d.action === 'probe') {
      expect(d.snapshot).toMatchObject({ state: 'half-open', probeInFlight: true, retryAt: NOW + CFG.openMs });
    }
    expect(d.reason).toBeTruthy();
  });

  it('open → half-open through evaluateCreate reports the transition', () => {
    const d = evaluateCreate(openUntil(NOW), CFG, NOW);
    expect(d.transition).toBe('half-open');
  });

  it('half-open lets exactly one create through; the rest wait until the lease', () => {
    const first = evaluateCreate(halfOpen(false), CFG, NOW);
    expect(first.action).toBe('probe');
    const second = evaluateCreate(first.snapshot, CFG, NOW);
    const third = evaluateCreate(second.snapshot, CFG, NOW + CFG.openMs - 1);
    expect(second).toMatchObject({ action: 'wait', retryAt: NOW + CFG.openMs });
    expect(third).toMatchObject({ action: 'wait', retryAt: NOW + CFG.openMs });
  });

  it('probeLeaseMs sets the lease', () => {
    const d = evaluateCreate(halfOpen(false), { ...CFG, probeLeaseMs: 35_000 }, NOW);
    expect(d.snapshot.retryAt).toBe(NOW + 35_000);
  });

  it('full cycle: failures open, tick half-opens, failed probe re-opens, passed canary closes', () => {
    let s: BreakerSnapshot = INITIAL_BREAKER;
    s = breakerOnFailure(s, CFG, NOW).snapshot;
    s = breakerOnFailure(s, CFG, NOW + 1).snapshot;
    const opened = breakerOnFailure(s, CFG, NOW + 2);
    expect(opened.transition).toBe('opened');
    s = opened.snapshot;
    expect(evaluateCreate(s, CFG, NOW + 2)).toMatchObject({ action: 'wait', retryAt: NOW + 2 + CFG.openMs });

    const probe = evaluateCreate(s, CFG, NOW + 2 + CFG.openMs);
    expect(probe.action).toBe('probe');
    const reopened = breakerOnFailure(probe.snapshot, CFG, NOW + 600);
    expect(reopened).toMatchObject({ transition: 'opened', snapshot: { state: 'open', retryAt: NOW + 600 + CFG.openMs } });

    const probe2 = evaluateCreate(reopened.snapshot, CFG, NOW + 600 + CFG.openMs);
    expect(probe2.action).toBe('probe');
    const closedStep = breakerOnCanaryPassed(probe2.snapshot, NOW + 1_200);
    expect(closedStep.transition).toBe('closed');
    expect(evaluateCreate(closedStep.snapshot, CFG, NOW + 1_200).action).toBe('create');
  });
});
