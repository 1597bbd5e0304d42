import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { keys } from './names.js';

/**
 * How long a run waits for a replica to have its claim (the move to running, the lock before it)
 * or its ending before it goes on without. A healthy replica answers in well under a millisecond;
 * past this the replica is behind or away, and a run must not stall on it.
 */
export const REPLICA_ACK_TIMEOUT_MS = 250;
/** After an ack timed out or failed, runs go on without asking for this long, so a missing replica costs one timeout, not one per card. */
export const REPLICA_ACK_BACKOFF_MS = 30_000;
/** The whole ask, its round trip included: past this (Redis away, the connection waiting to reconnect) it failed. */
export const REPLICA_ACK_DEADLINE_MS = 1_000;

export interface ReplicaAckState {
  /** Until then acks are not asked for: the last one timed out or failed. */
  degradedUntilMs?: number;
}

export type ReplicaAckOutcome = 'acked' | 'timed-out' | 'failed' | 'skipped';

/** Whether to ask a replica now: not while degraded. */
export function shouldAskReplica(state: ReplicaAckState, nowMs: number): boolean {
  return state.degradedUntilMs === undefined || nowMs >= state.degradedUntilMs;
}

/**
 * The state after an ack's outcome, and what changed: `degraded` when a replica stopped answering
 * in time (runs go on without for the backoff), `recovered` when one answers again.
 */
export function afterReplicaAck(
  state: ReplicaAckState,
  outcome: Exclude<ReplicaAckOutcome, 'skipped'>,
  nowMs: number,
  backoffMs: number,
): { state: ReplicaAckState; change?: 'degraded' | 'recovered' } {
  if (outcome === 'acked') return state.degradedUntilMs === undefined ? { state } : { state: {}, change: 'recovered' };
  return { state: { degradedUntilMs: nowMs + backoffMs }, ...(state.degradedUntilMs === undefined ? { change: 'degraded' as const } : {}) };
}

export interface ReplicaAckDeps {
  /** A connection of its own: WAIT blocks the connection it is sent on, and no other command may wait behind it. */
  conn: Redis;
  log: Logger;
  now: () => number;
  timeoutMs?: number;
  backoffMs?: number;
}

/**
 * Waits until a replica has everything written so far (DESIGN "Redis high availability"): a write
 * of its own on its connection, then WAIT 1. Redis replicates one stream in order, so a replica that
 * has this write has every earlier write of every connection too: the run's move and lock. Under
 * Sentinel the replica with the most data is the one promoted, so an acked write survives a failover.
 */
export class ReplicaAck {
  private state: ReplicaAckState = {};
  private readonly timeoutMs: number;
  private readonly backoffMs: number;

  constructor(private readonly deps: ReplicaAckDeps) {
    this.timeoutMs = deps.timeoutMs ?? REPLICA_ACK_TIMEOUT_MS;
    this.backoffMs = deps.backoffMs ?? REPLICA_ACK_BACKOFF_MS;
  }

  async ack(): Promise<ReplicaAckOutcome> {
    if (!shouldAskReplica(this.state, this.deps.now())) return 'skipped';
    const outcome = await this.ask();
    const next = afterReplicaAck(this.state, outcome, this.deps.now(), this.backoffMs);
    this.state = next.state;
    if (next.change === 'degraded') {
      this.deps.log.warn(
        { event: 'redis.replica-lagging', outcome, timeoutMs: this.timeoutMs, backoffMs: this.backoffMs },
        'no replica acknowledged in time: runs go on without waiting for one, and a failover now may lose their latest moves',
      );
    } else if (next.change === 'recovered') {
      this.deps.log.info({ event: 'redis.replica-acking' }, 'a replica acknowledges again');
    }
    return outcome;
  }

  private async ask(): Promise<Exclude<ReplicaAckOutcome, 'skipped'>> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<'failed'>((resolve) => {
      timer = setTimeout(() => resolve('failed'), Math.max(REPLICA_ACK_DEADLINE_MS, 2 * this.timeoutMs));
    });
    const asked = this.deps.conn
      .pipeline()
      .set(keys.replicaAck(), String(this.deps.now()))
      .wait(1, this.timeoutMs)
      .exec()
      .then((replies) => {
        if (!replies || replies.some(([err]) => err)) return 'failed' as const;
        return Number(replies[1]![1]) >= 1 ? ('acked' as const) : ('timed-out' as const);
      })
      .catch(() => 'failed' as const);
    try {
      return await Promise.race([asked, deadline]);
    } finally {
      clearTimeout(timer);
    }
  }

  onError(listener: (err: Error) => void): void {
    this.deps.conn.on('error', listener);
  }

  close(): void {
    this.deps.conn.disconnect();
  }
}

/** A ReplicaAck on a connection of its own where Redis has replicas to wait for (Sentinel), else none. */
export function replicaAckFor(redis: Redis, deps: Omit<ReplicaAckDeps, 'conn'>): ReplicaAck | undefined {
  if (!redis.options.sentinels) return undefined;
  return new ReplicaAck({ ...deps, conn: redis.duplicate() });
}
