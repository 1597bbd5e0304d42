import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { defaults, type LaneConfig, type LaneIsolation } from '@lanes/contracts';
import { CardStore, CasStore, EventLog, FleetStore, LaneQueues, keys, replicaAckFor } from '@lanes/queue';
import { bestEffort, type SandboxProvider } from '@lanes/sandbox';
import { warnTo } from './best-effort.js';
import { subscribeKept } from './cancel-subscriber.js';
import { LaneWorker } from './lane-worker.js';
import { evaluateWorkerReadiness, type WorkerPhase, type WorkerReadiness } from './worker-readiness.js';

/**
 * How long shutdown waits for idle probes still in flight before it closes the connections they
 * use. A probe that answers in time finishes cleanly; a hung one (a poll the provider never
 * answers, up to its call deadline) is abandoned: it holds a sandbox we are terminating anyway,
 * and its late effects are best-effort. Long enough for a poll plus a canary on a healthy provider.
 */
export const IDLE_PROBE_STOP_WAIT_MS = 2_000;

/** Resolves when `work` settles or after `ms`, whichever is first. */
function settleWithin(work: Promise<unknown>, ms: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(resolve, ms);
    timer.unref();
    void work.finally(() => {
      clearTimeout(timer);
      resolve();
    });
  });
}

/** Resolves after `ms`, or as soon as `signal` aborts, including when it already has. */
export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) {
      resolve();
      return;
    }
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        resolve();
      },
      { once: true },
    );
  });
}

export interface WorkerAppOptions {
  lanes: readonly LaneConfig[];
  redis: Redis;
  log: Logger;
  /** The provider each lane's slots create sandboxes with. */
  providerFor: (lane: LaneConfig) => SandboxProvider;
  /** How each lane's agents are fenced: said at boot and published for GET /v1/lanes. Unset: not reported. */
  isolationOf?: (lane: LaneConfig) => LaneIsolation;
  filesBaseDir?: string;
  workerId?: string;
  heartbeatIntervalMs?: number;
  lockDurationMs?: number;
  now?: () => number;
  newNonce?: () => string;
  sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export interface WorkerApp {
  readonly workerId: string;
  readonly lanes: ReadonlyMap<string, LaneWorker>;
  start(): Promise<void>;
  stop(): Promise<void>;
  /** For a readiness probe: started, not draining, and its heartbeats reach Redis. */
  readiness(): WorkerReadiness;
}

/** The worker process: slots for every configured lane, heartbeats, and cancel delivery. */
export function createWorkerApp(options: WorkerAppOptions): WorkerApp {
  const now = options.now ?? Date.now;
  const workerId = options.workerId ?? `${hostname().replace(/[^A-Za-z0-9._-]/g, '-')}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const log = options.log.child({ worker: workerId });
  const { redis } = options;
  const events = new EventLog(redis);
  const store = new CardStore({ redis, now, log, lanes: options.lanes });
  const fleet = new FleetStore(redis);
  const casConnection = redis.duplicate();
  casConnection.on('error', (err: Error) => log.warn({ err: err.message }, 'breaker connection error'));
  const cas = new CasStore(casConnection);
  // Under Sentinel a run's claim and its ending wait for a replica (replica-ack.ts), on a connection of their own.
  const replicaAck = replicaAckFor(redis, { log, now });
  replicaAck?.onError((err) => log.warn({ err: err.message }, 'replica ack connection error'));
  const queues = new LaneQueues({ redis, store, lanes: options.lanes, onError: (err) => log.warn({ err: err.message }, 'queue connection error') });
  const heartbeatIntervalMs = options.heartbeatIntervalMs ?? defaults.DEFAULT_HEARTBEAT_INTERVAL_MS;
  const lanes = new Map<string, LaneWorker>();
  for (const lane of options.lanes) {
    lanes.set(
      lane.name,
      new LaneWorker({
        lane,
        workerId,
        redis,
        store,
        queues,
        events,
        fleet,
        cas,
        provider: options.providerFor(lane),
        log: log.child({ lane: lane.name }),
        now,
        newNonce: options.newNonce ?? (() => `lanes-canary-${randomUUID()}`),
        sleep: options.sleep ?? abortableSleep,
        filesBaseDir: options.filesBaseDir ?? process.cwd(),
        ...(replicaAck ? { replicaAck } : {}),
        ...(options.lockDurationMs ? { lockDurationMs: options.lockDurationMs } : {}),
      }),
    );
  }
  let subscriber: Redis | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  /** Idle upkeep started by beats and still in flight (each lane and slot guards its own). */
  const idleProbes = new Set<Promise<unknown>>();
  /** The beat sequence: advanced every beat, even one Redis did not take, so any beat that lands is news. */
  let beatSeq = 0;
  let phase: WorkerPhase = 'starting';
  let lastBeatOkAt: number | undefined;

  const stopCancelled = (cardIds: Iterable<string>, via: 'message' | 'request') => {
    for (const cardId of cardIds) {
      for (const lw of lanes.values()) if (lw.stopCard(cardId, 'cancel')) log.info({ cardId, event: 'card.cancel-requested', via }, 'cancel delivered');
    }
  };
  /** The cancel requests kept on the cards this worker runs: those whose message it did not hear. */
  const readCancelRequests = async () => {
    const running = [...lanes.values()].flatMap((lw) => lw.runningCardIds());
    if (running.length > 0) stopCancelled(await store.cancelRequested(running), 'request');
  };

  const beat = async () => {
    beatSeq += 1;
    await bestEffort(
      'heartbeat',
      async () => {
        await fleet.beat(workerId, beatSeq);
        lastBeatOkAt = now();
        for (const lw of lanes.values()) for (const slot of lw.pool.slots) await lw.publish(slot);
      },
      warnTo(log),
    );
    await bestEffort('read cancel requests', readCancelRequests, warnTo(log));
    // After the beat, never awaited by it: a slow provider poll must not stall heartbeats. Started
    // every beat: a slot whose probe is still out skips, the others are probed.
    for (const lw of lanes.values()) {
      // Slots follow the queue beside the probes: a slot being probed is not taken away (see SlotView).
      const probe: Promise<unknown> = Promise.all([lw.followDemand(), lw.checkIdleSlots()])
        .catch(() => undefined)
        .finally(() => idleProbes.delete(probe));
      idleProbes.add(probe);
    }
  };

  return {
    workerId,
    lanes,
    async start() {
      await fleet.registerLanes(options.lanes.map((l) => ({ name: l.name, provider: l.provider, ...(options.isolationOf ? { isolation: options.isolationOf(l) } : {}) })));
      for (const lane of options.lanes) announceIsolation(log, lane.name, options.isolationOf?.(lane));
      await beat();
      subscriber = await subscribeKept(redis, keys.cancelChannel(), {
        onMessage: (cardId) => stopCancelled([cardId], 'message'),
        onError: (label, err) => log.warn({ err: err.message }, `cancel subscriber: ${label}`),
        onResubscribed: () => void bestEffort('read cancel requests', readCancelRequests, warnTo(log)),
      });
      for (const lw of lanes.values()) lw.start();
      heartbeat = setInterval(() => void beat(), heartbeatIntervalMs);
      phase = 'running';
      log.info({ lanes: [...lanes.keys()], event: 'worker.started' }, 'worker started');
    },
    readiness() {
      return evaluateWorkerReadiness({ phase, ...(lastBeatOkAt !== undefined ? { lastBeatOkAt } : {}) }, { heartbeatIntervalMs }, now());
    },
    async stop() {
      phase = 'stopping';
      // Keep beating until the cards are handed back and the sandboxes ended: a silent worker's
      // sandboxes are the supervisor's to reap, and that must not race our own hand-back.
      await Promise.all([...lanes.values()].map((lw) => lw.stop()));
      if (heartbeat) clearInterval(heartbeat);
      // Bounded: a hung poll must not hold shutdown.
      await settleWithin(Promise.all(idleProbes), IDLE_PROBE_STOP_WAIT_MS);
      await bestEffort('forget worker', () => fleet.forgetWorker(workerId), warnTo(log));
      if (subscriber) await bestEffort('unsubscribe', () => subscriber!.quit(), warnTo(log));
      await queues.close();
      await cas.close();
      replicaAck?.close();
      phase = 'stopped';
      log.info({ event: 'worker.stopped' }, 'worker stopped');
    },
  };
}

/** Said once at boot: a lane that can only run trusted agents says so as a warning, with why. */
function announceIsolation(log: Logger, lane: string, isolation: LaneIsolation | undefined): void {
  if (!isolation) return;
  const fields = { lane, isolation: isolation.mode, trustedAgentsOnly: isolation.trustedAgentsOnly, ...(isolation.why ? { why: isolation.why } : {}), event: 'lane.isolation' };
  if (isolation.trustedAgentsOnly) log.warn(fields, `lane ${lane} runs TRUSTED AGENTS ONLY (${isolation.mode}): ${isolation.why ?? 'no separation from the worker'}`);
  else log.info(fields, `lane ${lane} isolates its agents (${isolation.mode})`);
}
