import { describe, expect, it } from 'vitest';
import { defaults, type WorkerLiveness } from '@lanes/contracts';
import {
  DEFAULT_LIVENESS_CONFIG,
  INITIAL_LIVENESS_STATE,
  LivenessTracker,
  evaluateLiveness,
  livenessOf,
  trackBeats,
  type BeatObservation,
  type LivenessConfig,
  type LivenessState,
} from '@lanes/supervision';

/** A monotonic reading, nowhere near any wall clock: liveness never needs one. */
const NOW = 50_000;
const T = 4_000;
const GAP = 2_000;
const CFG: LivenessConfig = { heartbeatTimeoutMs: T, maxObservationGapMs: GAP };

const state = (visibleSinceMs: number | undefined, progressAtMs: number, advanced = true): LivenessState => ({
  ...(visibleSinceMs === undefined ? {} : { visibleSinceMs }),
  lastReadAtMs: NOW,
  workers: { w: { seq: 7, progressAtMs, advanced } },
});

describe('liveness defaults', () => {
  it('judge on the heartbeat timeout and vouch for gaps up to half of it', () => {
    expect(DEFAULT_LIVENESS_CONFIG).toEqual({
      heartbeatTimeoutMs: defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS,
      maxObservationGapMs: defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS / 2,
    });
  });
});

describe('evaluateLiveness', () => {
  it.each<[string, number | undefined, number, WorkerLiveness, boolean?]>([
    ['Redis not visible on the last read, however silent', undefined, NOW - 60_000, 'unknown'],
    ['Redis not visible, beat just seen before', undefined, NOW, 'unknown'],
    ['progress just now', NOW - 60_000, NOW, 'alive'],
    ['progress timeout − 1 ms ago', NOW - 60_000, NOW - T + 1, 'alive'],
    ['progress exactly timeout ago', NOW - 60_000, NOW - T, 'alive'],
    ['progress timeout + 1 ms ago, watched long: gone', NOW - 60_000, NOW - T - 1, 'gone'],
    ['silent for a minute, watched long: gone', NOW - 60_000, NOW - 60_000, 'gone'],
    ['silent long, Redis visible timeout − 1 ms: waits', NOW - T + 1, NOW - 60_000, 'unknown'],
    ['silent long, Redis visible exactly timeout: waits', NOW - T, NOW - 60_000, 'unknown'],
    ['silent long, Redis visible timeout + 1 ms: gone', NOW - T - 1, NOW - 60_000, 'gone'],
    ['regained just now, silent since before the outage', NOW, NOW - 60_000, 'unknown'],
    ['only first seen, timeout − 1 ms ago: not yet seen to move', NOW - 60_000, NOW - T + 1, 'unknown', false],
    ['only first seen, exactly timeout ago', NOW - T, NOW - T, 'unknown', false],
    ['only first seen at (re)gain, timeout + 1 ms ago, never moved: gone', NOW - T - 1, NOW - T - 1, 'gone', false],
  ])('%s → %s', (_what, visibleSinceMs, progressAtMs, liveness, advanced = true) => {
    const [v] = evaluateLiveness(state(visibleSinceMs, progressAtMs, advanced), CFG, NOW);
    expect(v).toMatchObject({ worker: 'w', liveness });
    expect(v!.reason).toBeTruthy();
  });

  it('judges every tracked worker, none when none are tracked', () => {
    const s: LivenessState = {
      visibleSinceMs: 0,
      lastReadAtMs: NOW,
      workers: { a: { seq: 1, progressAtMs: NOW, advanced: true }, b: { seq: 1, progressAtMs: 0, advanced: true } },
    };
    expect(evaluateLiveness(s, CFG, NOW).map((v) => [v.worker, v.liveness])).toEqual([
      ['a', 'alive'],
      ['b', 'gone'],
    ]);
    expect(evaluateLiveness(INITIAL_LIVENESS_STATE, CFG, NOW)).toEqual([]);
  });
});

describe('livenessOf', () => {
  it('reads a missing verdict as unknown, never gone', () => {
    const verdicts = { w: { worker: 'w', liveness: 'gone' as const, reason: 'r' } };
    expect(livenessOf(verdicts, 'w')).toBe('gone');
    expect(livenessOf(verdicts, 'other')).toBe('unknown');
    expect(livenessOf(verdicts, 'constructor')).toBe('unknown');
  });
});

describe('trackBeats', () => {
  const seen: LivenessState = { visibleSinceMs: NOW - 10_000, lastReadAtMs: NOW - 500, redisRunId: 'r1', workers: { w: { seq: 7, progressAtMs: NOW - 3_000, advanced: true } } };
  const ok = (beats: Record<string, number>, redisRunId = 'r1'): BeatObservation => ({ ok: true, beats, redisRunId });

  it.each<[string, LivenessState, BeatObservation, number, number | undefined, string | undefined]>([
    ['same Redis, gap well inside: the stretch goes on', seen, ok({ w: 7 }), NOW, NOW - 10_000, undefined],
    ['gap exactly maxObservationGapMs: still vouched for', { ...seen, lastReadAtMs: NOW - GAP }, ok({ w: 7 }), NOW, NOW - 10_000, undefined],
    ['gap maxObservationGapMs + 1 ms: starts over', { ...seen, lastReadAtMs: NOW - GAP - 1 }, ok({ w: 7 }), NOW, NOW, 'liveness.redis-regained'],
    ['Redis run id changed: restarted, starts over', seen, ok({ w: 7 }, 'r2'), NOW, NOW, 'liveness.redis-regained'],
    ['first read since start', INITIAL_LIVENESS_STATE, ok({ w: 7 }), NOW, NOW, 'liveness.redis-regained'],
    ['first good read after a failed one', { ...seen, visibleSinceMs: undefined }, ok({ w: 7 }), NOW, NOW, 'liveness.redis-regained'],
    ['a failed read ends visibility', seen, { ok: false, reason: 'ECONNREFUSED' }, NOW, undefined, 'liveness.redis-lost'],
    ['a failed read while already blind says nothing new', { ...seen, visibleSinceMs: undefined }, { ok: false, reason: 'x' }, NOW, undefined, undefined],
  ])('%s', (_what, before, observation, now, visibleSinceMs, event) => {
    const step = trackBeats(before, observation, CFG, now);
    expect(step.state.visibleSinceMs).toBe(visibleSinceMs);
    expect(step.visibility?.event).toBe(event);
    if (event) expect(step.visibility!.reason).toBeTruthy();
  });

  it.each<[string, Record<string, number>, LivenessState['workers']]>([
    ['unchanged sequence keeps its progress time', { w: 7 }, { w: { seq: 7, progressAtMs: NOW - 3_000, advanced: true } }],
    ['advanced sequence is progress now', { w: 8 }, { w: { seq: 8, progressAtMs: NOW, advanced: true } }],
    ['a sequence that went back (Redis lost data) is progress too', { w: 1 }, { w: { seq: 1, progressAtMs: NOW, advanced: true } }],
    [
      'a worker first seen starts its clock now, not yet advanced',
      { w: 7, x: 1 },
      { w: { seq: 7, progressAtMs: NOW - 3_000, advanced: true }, x: { seq: 1, progressAtMs: NOW, advanced: false } },
    ],
    ['a forgotten worker is dropped', {}, {}],
  ])('%s', (_what, beats, workers) => {
    expect(trackBeats(seen, ok(beats), CFG, NOW).state.workers).toEqual(workers);
  });

  it('a failed read is no evidence: sequences and progress times are kept', () => {
    expect(trackBeats(seen, { ok: false, reason: 'down' }, CFG, NOW).state.workers).toEqual(seen.workers);
  });
});

describe('LivenessTracker across an outage', () => {
  /** Sweeps every T/4 on the supervisor's clock; `beats` says what each sweep reads (undefined: the read fails). */
  function run(sweeps: Array<Record<string, number> | undefined>): WorkerLiveness[][] {
    const tracker = new LivenessTracker(CFG);
    return sweeps.map((beats, i) => {
      const now = i * (T / 4);
      tracker.observe(beats ? { ok: true, beats, redisRunId: 'r1' } : { ok: false, reason: 'down' }, now);
      return tracker.verdicts(now).map((v) => v.liveness);
    });
  }

  it('never calls a live worker gone when Redis was away longer than the timeout', () => {
    // Beating (seq advances) until Redis dies, 12 failed sweeps (3 × T), then seq frozen on the
    // first reads after the restart (the worker is still reconnecting), then beating again.
    const sweeps: Array<Record<string, number> | undefined> = [{ w: 1 }, { w: 2 }, { w: 3 }];
    for (let i = 0; i < 12; i += 1) sweeps.push(undefined);
    sweeps.push({ w: 3 }, { w: 3 }, { w: 3 }, { w: 4 }, { w: 5 });
    const verdicts = run(sweeps).flat();
    expect(verdicts).not.toContain('gone');
    expect(verdicts.at(-1)).toBe('alive');
  });

  it('calls a worker gone once its sequence stood still for more than a timeout of visible sweeps', () => {
    const sweeps: Array<Record<string, number>> = [{ w: 1 }, { w: 2 }];
    for (let i = 0; i < 6; i += 1) sweeps.push({ w: 2 });
    // seq 2 first seen at sweep 1 (t = T/4); gone needs now − T/4 > T, i.e. sweep 6 (t = 6T/4).
    expect(run(sweeps).map((v) => v[0])).toEqual(['unknown', 'alive', 'alive', 'alive', 'alive', 'alive', 'gone', 'gone']);
  });

  it('a supervisor that starts beside a long-dead worker waits a full timeout', () => {
    const verdicts = run(Array.from({ length: 6 }, () => ({ w: 42 }))).map((v) => v[0]);
    expect(verdicts).toEqual(['unknown', 'unknown', 'unknown', 'unknown', 'unknown', 'gone']);
  });
});
