import { defaults, type LivenessVerdict, type WorkerLiveness } from '@lanes/contracts';

/**
 * Liveness without clocks. Workers publish a beat SEQUENCE (a counter they advance each beat), never
 * a timestamp. The supervisor notes, on its OWN monotonic clock, when it saw each worker's sequence
 * change, and only time it could see Redis itself counts as watching. No timestamp written by
 * another host is compared with this host's clock.
 *
 * Every caller (reaping, forgetting, the re-drive gate, the API's lane status) reads the verdicts
 * `evaluateLiveness` returns; it is the only place freshness is judged.
 */
export interface LivenessConfig {
  /** A worker whose sequence has not moved for longer than this, while Redis was visible throughout, is gone. */
  heartbeatTimeoutMs: number;
  /**
   * Two successful reads further apart than this do not vouch for the time between them (the
   * supervisor stalled, or a read hung across an outage): visibility starts over.
   */
  maxObservationGapMs: number;
}

/**
 * Sweeps run every heartbeatTimeoutMs/4 by default, so half a timeout allows one missed sweep
 * before the supervisor stops vouching for the stretch, while a hidden outage stays short enough
 * for a live worker to beat again before a full timeout has passed.
 */
export const DEFAULT_LIVENESS_CONFIG: LivenessConfig = {
  heartbeatTimeoutMs: defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS,
  maxObservationGapMs: defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS / 2,
};

/** One sweep's read of the beats: the sequences, and the identity of the Redis that answered. */
export type BeatObservation = { ok: true; beats: Readonly<Record<string, number>>; redisRunId?: string } | { ok: false; reason: string };

/** What the supervisor carries between sweeps; all times are on its own monotonic clock. */
export interface LivenessState {
  /** Start of the current unbroken stretch of successful reads; absent while Redis is not visible. */
  visibleSinceMs?: number;
  lastReadAtMs?: number;
  redisRunId?: string;
  /** Per worker: the last sequence seen, when it was last seen to change (or first seen), and whether it ever was. */
  workers: Readonly<Record<string, TrackedWorker>>;
}

export interface TrackedWorker {
  seq: number;
  progressAtMs: number;
  /** False until the sequence is seen to change: first sight alone proves nothing about now. */
  advanced: boolean;
}

export const INITIAL_LIVENESS_STATE: LivenessState = { workers: {} };

export interface LivenessStep {
  state: LivenessState;
  /** Set when this read started or broke a stretch of visibility, for the log. */
  visibility?: { event: 'liveness.redis-lost' | 'liveness.redis-regained'; reason: string };
}

/**
 * Folds one read into the state. A failed read ends visibility (and is not evidence about any
 * worker). A read that follows a failed one, a start, a gap longer than maxObservationGapMs or a
 * different Redis (a restart or failover changes its run id) starts a new stretch at `now`. A
 * sequence that changed, or a worker seen for the first time, counts as progress at `now`; workers
 * no longer listed (forgotten) are dropped.
 */
export function trackBeats(state: LivenessState, observation: BeatObservation, config: LivenessConfig, now: number): LivenessStep {
  if (!observation.ok) {
    const { visibleSinceMs: _lost, ...rest } = state;
    const visibility = state.visibleSinceMs === undefined ? undefined : { event: 'liveness.redis-lost' as const, reason: observation.reason };
    return { state: rest, ...(visibility ? { visibility } : {}) };
  }
  const restart = restartReason(state, observation.redisRunId, config, now);
  const visibleSinceMs = restart === undefined ? state.visibleSinceMs! : now;
  const workers: Record<string, TrackedWorker> = {};
  for (const [worker, seq] of Object.entries(observation.beats)) {
    const seen = Object.hasOwn(state.workers, worker) ? state.workers[worker] : undefined;
    if (seen === undefined) workers[worker] = { seq, progressAtMs: now, advanced: false };
    else workers[worker] = seen.seq === seq ? seen : { seq, progressAtMs: now, advanced: true };
  }
  const next: LivenessState = {
    visibleSinceMs,
    lastReadAtMs: now,
    ...(observation.redisRunId !== undefined ? { redisRunId: observation.redisRunId } : {}),
    workers,
  };
  return { state: next, ...(restart !== undefined ? { visibility: { event: 'liveness.redis-regained', reason: restart } } : {}) };
}

function restartReason(state: LivenessState, runId: string | undefined, config: LivenessConfig, now: number): string | undefined {
  if (state.visibleSinceMs === undefined || state.lastReadAtMs === undefined) return 'first successful read since start or since Redis was lost';
  if (runId !== undefined && state.redisRunId !== undefined && runId !== state.redisRunId) return `Redis run id changed (${state.redisRunId} → ${runId}): restarted or failed over`;
  const gapMs = now - state.lastReadAtMs;
  if (gapMs > config.maxObservationGapMs) return `${gapMs} ms since the previous read (> ${config.maxObservationGapMs} ms): the time between is not vouched for`;
  return undefined;
}

/**
 * The rule, one verdict per tracked worker, in key order:
 * - unknown: Redis was not visible on the last read.
 * - alive:   its sequence moved at most heartbeatTimeoutMs ago (now − progressAt ≤ timeout);
 *            unknown instead while it has only been seen, never seen to move.
 * - unknown: it has been silent longer, but Redis has been visible for at most heartbeatTimeoutMs:
 *            a supervisor that just (re)gained Redis waits a full timeout before judging.
 * - gone:    silent for longer than heartbeatTimeoutMs AND watched for longer than that.
 * At exactly the timeout a worker is still alive (or unknown); gone needs strictly more.
 */
export function evaluateLiveness(state: LivenessState, config: LivenessConfig, now: number): LivenessVerdict[] {
  const timeoutMs = config.heartbeatTimeoutMs;
  return Object.entries(state.workers).map(([worker, { seq, progressAtMs, advanced }]): LivenessVerdict => {
    if (state.visibleSinceMs === undefined) return { worker, liveness: 'unknown', reason: 'Redis not visible on the last sweep' };
    const silentMs = now - progressAtMs;
    if (silentMs <= timeoutMs) {
      return advanced
        ? { worker, liveness: 'alive', reason: `beat ${seq} seen ${silentMs} ms ago (≤ ${timeoutMs} ms)` }
        : { worker, liveness: 'unknown', reason: `first seen at beat ${seq} ${silentMs} ms ago, not yet seen to advance` };
    }
    const watchedMs = now - state.visibleSinceMs;
    if (watchedMs <= timeoutMs) {
      return { worker, liveness: 'unknown', reason: `no new beat for ${silentMs} ms, but Redis visible for only ${watchedMs} ms (≤ ${timeoutMs} ms)` };
    }
    const watchedSilentMs = Math.min(silentMs, watchedMs);
    return { worker, liveness: 'gone', silentMs: watchedSilentMs, reason: `beat stuck at ${seq} for ${watchedSilentMs} ms while Redis was visible (> ${timeoutMs} ms)` };
  });
}

/** A worker's verdict; no verdict (never seen, forgotten, nothing published yet) is unknown, never gone. */
export function livenessOf(verdicts: Readonly<Record<string, LivenessVerdict>>, worker: string): WorkerLiveness {
  return Object.hasOwn(verdicts, worker) ? verdicts[worker]!.liveness : 'unknown';
}

export function verdictsByWorker(verdicts: readonly LivenessVerdict[]): Record<string, LivenessVerdict> {
  return Object.fromEntries(verdicts.map((v) => [v.worker, v]));
}

/** The state a supervisor carries between sweeps: a thin holder around `trackBeats`. */
export class LivenessTracker {
  private state: LivenessState = INITIAL_LIVENESS_STATE;

  constructor(private readonly config: LivenessConfig) {}

  observe(observation: BeatObservation, now: number): LivenessStep['visibility'] {
    const step = trackBeats(this.state, observation, this.config, now);
    this.state = step.state;
    return step.visibility;
  }

  verdicts(now: number): LivenessVerdict[] {
    return evaluateLiveness(this.state, this.config, now);
  }
}
