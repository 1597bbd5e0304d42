import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { performance } from 'node:perf_hooks';
import { defaults, type CallbackAllowRule, type LaneConfig, type LivenessVerdict } from '@lanes/contracts';
import { CardStore, EventLog, EventWindow, FleetStore, LaneQueues, type StoredEvent } from '@lanes/queue';
import type { SandboxProvider } from '@lanes/sandbox';
import { CallbackDispatcher } from './callbacks.js';
import type { CallbackLookup } from './callback-target.js';
import type { CallbackConcurrencyConfig, CallbackRetryConfig } from './callback-policy.js';
import {
  LivenessTracker,
  evaluateFleet,
  attributeOwners,
  evaluateOrphans,
  evaluateRedriveGate,
  evaluateWorkerRecords,
  selectRedrive,
  slotVerdictsOf,
  verdictsByWorker,
  type BeatObservation,
  type ListedSandbox,
} from '@lanes/supervision';

/** One sweep per heartbeat: an orphan is reaped within two heartbeat periods of its owner's last beat. */
export const DEFAULT_SWEEP_INTERVAL_MS = defaults.DEFAULT_HEARTBEAT_INTERVAL_MS / 2;
/** Verdicts older than this no longer shape the lane's health. */
export const FLEET_WINDOW_MS = 60_000;
/** At most this many events of the window shape the health call. */
const RECENT_EVENTS = 5_000;
/**
 * Published liveness verdicts live this many heartbeat timeouts: a dozen sweeps at the default
 * cadence, so a slow sweep never lets them lapse, yet a stopped supervisor's verdicts soon read as unknown.
 */
const LIVENESS_TTL_TIMEOUTS = 3;

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
  const recentEvents = new EventWindow(events, FLEET_WINDOW_MS, RECENT_EVENTS);
  const store = new CardStore({ redis, events, now, lanes });
  const fleet = new FleetStore(redis);
  const queues = new LaneQueues({ redis, store, lanes, onError: (err) => log.warn({ err: err.message }, 'queue connection error') });
  const monotonicNow = options.monotonicNow ?? (() => performance.now());
  const heartbeatTimeoutMs = options.heartbeatTimeoutMs ?? defaults.DEFAULT_HEARTBEAT_TIMEOUT_MS;
  const liveness = new LivenessTracker({
    heartbeatTimeoutMs,
    // Half a timeout, as DEFAULT_LIVENESS_CONFIG explains, of whatever timeout this supervisor uses.
    maxObservationGapMs: options.maxObservationGapMs ?? heartbeatTimeoutMs / 2,
  });
  let previousVerdicts: Record<string, LivenessVerdict> = {};
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
          ...(options.callbacks.concurrency ? { concurrency: options.callbacks.concurrency } : {}),
          ...(options.callbacks.retry ? { retry: options.callbacks.retry } : {}),
          ...(options.callbacks.allow ? { allow: options.callbacks.allow } : {}),
          ...(options.callbacks.lookup ? { lookup: options.callbacks.lookup } : {}),
          ...(options.now ? { now: options.now } : {}),
        })
      : undefined;
  let timer: NodeJS.Timeout | undefined;
  let sweeping: Promise<void> | undefined;

  /** Reaps orphans; returns every sandbox still listed, or undefined when a provider could not list (then nothing is forgotten). */
  async function reapOrphans(verdicts: Record<string, LivenessVerdict>): Promise<ListedSandbox[] | undefined> {
    const remaining: ListedSandbox[] = [];
    let complete = true;
    for (const provider of new Set(options.providers)) {
      const listed = await listWithOwners(provider);
      if (!listed) {
        complete = false;
        continue;
      }
      for (const d of evaluateOrphans({ sandboxes: listed, liveness: verdicts }, { reapAfterSilenceMs: options.lockDurationMs ?? DEFAULT_BULLMQ_LOCK_DURATION_MS })) {
        const ref = listed.find((s) => s.id === d.id);
        const kept = d.action !== 'reap' || !(await reap(provider, d.id, d.reason, ref));
        if (kept && ref) remaining.push(ref);
      }
    }
    return complete ? remaining : undefined;
  }

  /** The provider's sandboxes, owners the listing does not tag taken from lanes' own record of what it created; undefined when it could not list. */
  async function listWithOwners(provider: SandboxProvider): Promise<ListedSandbox[] | undefined> {
    try {
      const listed = await provider.list();
      const untagged = listed.filter((s) => !s.tags.worker).map((s) => s.id);
      return untagged.length ? attributeOwners(listed, await fleet.sandboxOwners(untagged)) : listed;
    } catch (err) {
      log.warn({ err, provider: provider.name }, 'could not list sandboxes; no reaping on this provider this sweep');
      return undefined;
    }
  }

  /** Terminates one orphan by id and says so (log and event); false when the terminate failed (it is tried again next sweep). */
  async function reap(provider: SandboxProvider, id: string, reason: string, ref: ListedSandbox | undefined): Promise<boolean> {
    try {
      await provider.terminateById(id);
    } catch (err) {
      log.warn({ err, sandboxId: id }, 'orphan terminate failed; retrying next sweep');
      return false;
    }
    log.warn({ event: 'sandbox.reaped', sandboxId: id, lane: ref?.tags.lane, slot: ref?.tags.slot, reason }, 'sandbox.reaped');
    await events.append({
      type: 'sandbox.reaped',
      at: new Date(now()).toISOString(),
      lane: ref?.tags.lane ?? 'unknown',
      sandboxId: id,
      ...(ref?.tags.slot ? { slot: ref.tags.slot } : {}),
      data: { reason, owner: ref?.tags.worker ?? null },
    });
    return true;
  }

  /** Drops the records of workers that are gone and own nothing any more, so dead workers do not pile up. */
  async function forgetGoneWorkers(verdicts: Record<string, LivenessVerdict>, remaining: ListedSandbox[]): Promise<void> {
    for (const d of evaluateWorkerRecords({ sandboxes: remaining, liveness: verdicts })) {
      if (d.action !== 'forget') continue;
      for (const lane of lanes) await fleet.removeSlots(lane.name, d.worker);
      await fleet.forgetWorker(d.worker);
      log.info({ event: 'worker.forgotten', worker: d.worker, reason: d.reason }, 'worker.forgotten');
    }
  }

  async function laneSweep(lane: LaneConfig, verdicts: Record<string, LivenessVerdict>, recent: StoredEvent[]): Promise<void> {
    // Listed before the breaker is read: a worker opens the breaker before it blocks a card for an
    // outage, so no listed card is judged on a breaker read older than its block.
    const blocked = await store.blocked(lane.name);
    const breaker = await fleet.breaker(lane.name);
    const health = evaluateFleet({ breaker: breaker.state, recentVerdicts: slotVerdictsOf(recent, lane.name) }, { windowMs: FLEET_WINDOW_MS }, now());
    const previous = await fleet.health(lane.name);
    await fleet.putHealth(lane.name, { status: health.status, reason: health.reason, at: new Date(now()).toISOString() });
    if (previous?.status !== health.status) log.info({ lane: lane.name, event: 'lane.health', status: health.status, reason: health.reason }, 'lane.health');

    // A card blocked by a worker that died before re-driving it: re-drive once any live slot of the lane exists.
    const gate = evaluateRedriveGate({ breaker: breaker.state, slots: await fleet.slots(lane.name), liveness: verdicts });
    if (gate.action === 'hold') return;
    const { ids } = await queues.redriveBlocked(lane.name, blocked, (cards) => selectRedrive(cards, { type: 'sandbox-live', lane: lane.name }), 're-driven by supervisor sweep');
    for (const id of ids) log.info({ event: 'card.redriven', cardId: id, lane: lane.name, trigger: 'supervisor-sweep' }, 'card.redriven');
  }

  /** Reads the beats, folds them into the tracker on this host's monotonic clock, and judges every worker. */
  async function judgeLiveness(): Promise<{ visible: boolean; verdicts: Record<string, LivenessVerdict> }> {
    let observation: BeatObservation;
    try {
      observation = { ok: true, ...(await fleet.readBeats()) };
    } catch (err) {
      observation = { ok: false, reason: err instanceof Error ? err.message : String(err) };
    }
    // Read after the beats arrive: a read that hung across an outage must show as a gap.
    const at = monotonicNow();
    const visibility = liveness.observe(observation, at);
    if (visibility?.event === 'liveness.redis-lost') log.warn({ event: visibility.event, reason: visibility.reason }, visibility.event);
    else if (visibility) log.info({ event: visibility.event, reason: visibility.reason }, visibility.event);
    const verdicts = verdictsByWorker(liveness.verdicts(at));
    for (const v of Object.values(verdicts)) {
      if (v.liveness !== previousVerdicts[v.worker]?.liveness) log.info({ event: `worker.${v.liveness}`, worker: v.worker, reason: v.reason }, `worker.${v.liveness}`);
    }
    previousVerdicts = verdicts;
    return { visible: observation.ok, verdicts };
  }

  async function sweepOnce(): Promise<void> {
    const { visible, verdicts } = await judgeLiveness();
    // A sweep that could not read Redis is not evidence of anything: nothing is reaped or forgotten.
    if (!visible) return;
    await fleet.putLiveness(Object.values(verdicts), LIVENESS_TTL_TIMEOUTS * heartbeatTimeoutMs);
    const remaining = await reapOrphans(verdicts);
    if (remaining) await forgetGoneWorkers(verdicts, remaining);
    const recent = await recentEvents.read(now());
    for (const lane of lanes) await laneSweep(lane, verdicts, recent);
  }

  const sweep = async () => {
    // Never two sweeps at once: a slow provider list must not pile up terminations.
    sweeping ??= sweepOnce()
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
