/** Where a worker process is in its life: readiness is only ever true while `running`. */
export type WorkerPhase = 'starting' | 'running' | 'stopping' | 'stopped';

export interface WorkerReadinessSnapshot {
  phase: WorkerPhase;
  /** When Redis last took this worker's heartbeat. */
  lastBeatOkAt?: number;
}

/**
 * A worker is ready while Redis has taken one of its last `READY_BEATS` heartbeats: one missed
 * beat is a blip, three in a row mean the worker cannot fetch cards or be seen by the supervisor.
 */
export const READY_BEATS = 3;

export type WorkerReadiness = { ready: true; reason: string } | { ready: false; reason: string };

/** The readiness probe's answer (`/readyz` of a worker container); liveness never depends on it. */
export function evaluateWorkerReadiness(snapshot: WorkerReadinessSnapshot, config: { heartbeatIntervalMs: number }, now: number): WorkerReadiness {
  if (snapshot.phase !== 'running') return { ready: false, reason: `worker is ${snapshot.phase}` };
  if (snapshot.lastBeatOkAt === undefined) return { ready: false, reason: 'no heartbeat has reached Redis yet' };
  const sinceMs = now - snapshot.lastBeatOkAt;
  const windowMs = READY_BEATS * config.heartbeatIntervalMs;
  if (sinceMs > windowMs) return { ready: false, reason: `last heartbeat reached Redis ${sinceMs} ms ago (> ${windowMs} ms)` };
  return { ready: true, reason: `last heartbeat reached Redis ${sinceMs} ms ago` };
}
