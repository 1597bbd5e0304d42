import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { performance } from 'node:perf_hooks';
import { defaults, type CallbackAllowRule, type LaneConfig } from '@lanes/contracts';
import { CardStore, EventLog, EventWindow, FleetStore, LaneQueues } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import { LivenessTracker, VERDICT_EVENT_TYPES } from '@lanes/supervision';
import { CallbackDispatcher } from './callbacks.js';
import type { CallbackLookup } from './callback-target.js';
import type { CallbackConcurrencyConfig, CallbackRetryConfig } from './callback-policy.js';
import { FLEET_WINDOW_MS, SupervisorSweep } from './supervisor-sweep.js';

export { FLEET_WINDOW_MS } from './supervisor-sweep.js';

/** One sweep per heartbeat: an orphan is reaped within two heartbeat periods of its owner's last beat. */
export const DEFAULT_SWEEP_INTERVAL_MS = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS / 2;
/** At most this many events of the window shape the health call. */
const RECENT_EVENTS = 5_000;

export interface SupervisorOptions {
  redis: Redis;
  lanes: readonly LaneConfig[];
  log: Logger;
  /** Providers whose sandboxes this supervisor may reap, deduplicated by instance. */
  providers: readonly SandboxProvider[];
  sweepIntervalMs?: number;
  heartbeatTimeoutMs?: number;
  /**
   * The workers' BullMQ lock duration (LANES_LOCK_DURATION_MS): a gone worker's sandboxes are reaped
   * only after it has been silent for longer, when every run it had has fenced itself. Default
   * BullMQ's 30 s.
   */
  lockDurationMs?: number;
  /** Two successful beat reads further apart than this restart the watch. Default heartbeatTimeoutMs / 2. */
  maxObservationGapMs?: number;
  /** Wall clock, for event timestamps and the fleet window only. */
  now?: () => number;
  /** This process's monotonic clock (ms), the only clock liveness is judged on. Default performance.now. */
  monotonicNow?: () => number;
  /** Delivery of card callbacks; `secret` (and during a rotation `previousSecret`) signs each body. Off when absent. */
  callbacks?: {
    secret?: string;
    previousSecret?: string;
    /** Lanes' own callback secrets, by lane (current first); such a lane's cards are signed with them alone. */
    laneSecrets?: ReadonlyMap<string, readonly string[]>;
    retry?: CallbackRetryConfig;
    concurrency?: CallbackConcurrencyConfig;
    allow?: readonly CallbackAllowRule[];
    lookup?: CallbackLookup;
  };
}

export interface SupervisorApp {
  start(): Promise<void>;
  /** One sweep, for tests and `lanes up`'s first pass. */
  sweep(): Promise<void>;
  stop(): Promise<void>;
}

/** BullMQ's own default lock, what workers use when LANES_LOCK_DURATION_MS is unset. */
export const DEFAULT_BULLMQ_LOCK_DURATION_MS = 30_000;

/** Fleet decisions across workers: orphan reaping by id, the outage call, and a re-drive sweep. */
export function createSupervisorApp(options: SupervisorOptions): SupervisorApp {
  const now = options.now ?? Date.now;
  const log = options.log.child({ component: 'supervisor' });
  const { redis, lanes } = options;
  const events = new EventLog(redis);
  // The sweep reads only slot verdicts from it: the other events (a burst's card.queued) stay undecoded.
  const recentEvents = new EventWindow(events, FLEET_WINDOW_MS, RECENT_EVENTS, VERDICT_EVENT_TYPES);
  // With the log, a write the transition script refuses (a stale re-drive) is logged as card.stale-write.
  const store = new CardStore({ redis, events, now, lanes, log });
  const fleet = new FleetStore(redis);
  const queues = new LaneQueues({ redis, store, lanes, onError: (err) => log.warn({ err: err.message }, 'queue connection error') });
  const monotonicNow = options.monotonicNow ?? (() => performance.now());
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS;
  const liveness = new LivenessTracker({
    heartbeatTimeoutMs,
    // Half a timeout, as DEFAULT_LIVENESS_CONFIG explains, of whatever timeout this supervisor uses.
    maxObservationGapMs: options.maxObservationGapMs ?? heartbeatTimeoutMs / 2,
  });
  const consumer = `supervisor-${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const callbackConnection = options.callbacks ? redis.duplicate() : undefined;
  // Without a listener ioredis prints every failed reconnect of an outage as an unhandled error.
  callbackConnection?.on('error', (err: Error) => log.warn({ err: err.message }, 'callback connection error'));
  const callbacks =
    callbackConnection && options.callbacks
      ? new CallbackDispatcher({
          redis: callbackConnection,
          store,
          log,
          consumer,
          ...(options.callbacks.secret ? { secret: options.callbacks.secret } : {}),
          ...(options.callbacks.previousSecret ? { previousSecret: options.callbacks.previousSecret } : {}),
          ...(options.callbacks.laneSecrets ? { laneSecrets: options.callbacks.laneSecrets } : {}),
          ...(options.callbacks.concurrency ? { concurrency: options.callbacks.concurrency } : {}),
          ...(options.callbacks.retry ? { retry: options.callbacks.retry } : {}),
          ...(options.callbacks.allow ? { allow: options.callbacks.allow } : {}),
          ...(options.callbacks.lookup ? { lookup: options.callbacks.lookup } : {}),
          ...(options.now ? { now: options.now } : {}),
        })
      : undefined;
  const sweeper = new SupervisorSweep({
    lanes,
    log,
    store,
    fleet,
    queues,
    events,
    recentEvents,
    liveness,
    providers: options.providers,
    heartbeatTimeoutMs,
    reapAfterSilenceMs: options.lockDurationMs ?? DEFAULT_BULLMQ_LOCK_DURATION_MS,
    now,
    monotonicNow,
  });
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;

  const sweep = async () => {
    // Never two sweeps at once: a slow provider list must not pile up terminations.
    sweeping ??= sweeper
      .run()
      .catch((err: unknown) => log.warn({ err }, 'supervisor sweep failed'))
      .finally(() => (sweeping = undefined));
    await sweeping;
  };

  return {
    async start() {
      timer = setInterval(() => void sweep(), options.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS);
      void sweep();
      await callbacks?.start();
    },
    sweep,
    async stop() {
      if (timer) clearInterval(timer);
      await callbacks?.stop();
      await sweeping;
      await queues.close();
    },
  };
}
