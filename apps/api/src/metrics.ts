import { Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { LaneStatusDeps } from './lane-status.js';
import { laneStatuses } from './lane-status.js';
import { desiredWorkers } from '@lanes/supervision';

export interface Metrics {
  registry: Registry;
  /** Reads lane state from Redis into the gauges; call before serializing. */
  refresh(): Promise<void>;
  /** The Prometheus text exposition: refreshed, without blank lines. */
  exposition(): Promise<string>;
}

/** Prefix of the process and Node.js metrics: `lanes_process_cpu_seconds_total`, `lanes_nodejs_heap_size_total_bytes`. */
export const DEFAULT_METRICS_PREFIX = 'lanes_';

/**
 * prom-client joins metric blocks with a newline after each block's own, and a histogram with no
 * samples yet is an empty block: both leave blank lines, which strict scrapers and humans trip on.
 */
export function withoutBlankLines(text: string): string {
  const lines = text.split('\n').filter((line) => line.trim() !== '');
  return lines.length ? `${lines.join('\n')}\n` : '';
}

/** Prometheus metrics, computed from Redis at scrape time so every API replica reports the same. */
export function createMetrics(deps: LaneStatusDeps, sse?: { open(): number; dropped(): number; gaps(): number }, requests?: { readonly refused: number }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: DEFAULT_METRICS_PREFIX });
  const jobs = new Gauge({ name: 'lanes_cards', help: 'Cards per lane and state', labelNames: ['lane', 'state'], registers: [registry] });
  const slots = new Gauge({ name: 'lanes_slots', help: 'Slots per lane and sandbox state', labelNames: ['lane', 'state'], registers: [registry] });
  const desired = new Gauge({ name: 'lanes_desired_slots', help: 'Slots the lane wants for its queue depth', labelNames: ['lane'], registers: [registry] });
  const breaker = new Gauge({ name: 'lanes_breaker_open', help: '1 when the lane breaker is open or half-open', labelNames: ['lane'], registers: [registry] });
  const outage = new Gauge({ name: 'lanes_provider_outage', help: '1 when the supervisor calls a provider outage for the lane', labelNames: ['lane'], registers: [registry] });
  const workers = new Gauge({
    name: 'lanes_desired_workers',
    help: 'Worker containers the fleet wants: for each lane, desired slots / slots per worker, rounded up; the largest lane wins',
    registers: [registry],
  });
  const callbackBacklog = new Gauge({
    name: 'lanes_callback_backlog',
    help: 'Callbacks not yet delivered (the callback stream from its oldest unacknowledged entry on)',
    registers: [registry],
  });
  const callbackBacklogLimit = new Gauge({
    name: 'lanes_callback_backlog_limit',
    help: 'lanes_callback_backlog at which cards with a callbackUrl are refused (503 CALLBACK_BACKLOG)',
    registers: [registry],
  });
  const callbackOwed = new Gauge({
    name: 'lanes_callback_owed',
    help: "A lane's callbacks not yet delivered; at lanes_callback_owed_limit its cards with a callbackUrl are refused (503 CALLBACK_BACKLOG)",
    labelNames: ['lane'],
    registers: [registry],
  });
  const callbackOwedLimit = new Gauge({
    name: 'lanes_callback_owed_limit',
    help: 'lanes_callback_owed at which a lane is refused cards with a callbackUrl',
    registers: [registry],
  });
  if (sse) {
    new Gauge({
      name: 'lanes_sse_streams',
      help: 'Event streams (GET /v1/events) this API process holds open',
      registers: [registry],
      collect() {
        this.set(sse.open());
      },
    });
    new Gauge({
      name: 'lanes_sse_dropped_total',
      help: 'Event streams this API process dropped as slow consumers since it started',
      registers: [registry],
      collect() {
        this.set(sse.dropped());
      },
    });
    new Gauge({
      name: 'lanes_sse_gaps_total',
      help: 'Events or output lines trimmed before a stream could send them, told as event: gap since this API process started',
      registers: [registry],
      collect() {
        this.set(sse.gaps());
      },
    });
  }
  if (requests) {
    new Gauge({
      name: 'lanes_requests_rate_limited_total',
      help: 'Requests this API process refused (429 RATE_LIMITED) to tokens past their requestsPerSecond since it started',
      registers: [registry],
      collect() {
        this.set(requests.refused);
      },
    });
  }
  const scrapeOk = new Gauge({ name: 'lanes_scrape_ok', help: '1 when lane state could be read from Redis', registers: [registry] });
  // prom-client serializes metrics concurrently, so one refresh before serializing keeps them consistent.
  async function refresh(): Promise<void> {
    try {
      const lanes = await laneStatuses(deps);
      jobs.reset();
      slots.reset();
      let wanted = 0;
      for (const lane of lanes) {
        const perWorker = deps.lanes.find((l) => l.name === lane.name)?.slots ?? 1;
        wanted = Math.max(wanted, desiredWorkers(lane.desiredSlots, perWorker).desired);
        for (const [state, n] of Object.entries(lane.counts)) jobs.set({ lane: lane.name, state }, n);
        const bySandbox = new Map<string, number>();
        for (const s of lane.slots) bySandbox.set(s.sandbox?.state ?? 'none', (bySandbox.get(s.sandbox?.state ?? 'none') ?? 0) + 1);
        for (const [state, n] of bySandbox) slots.set({ lane: lane.name, state }, n);
        desired.set({ lane: lane.name }, lane.desiredSlots);
        breaker.set({ lane: lane.name }, lane.breaker.state === 'closed' ? 0 : 1);
        outage.set({ lane: lane.name }, lane.outage ? 1 : 0);
      }
      workers.set(wanted);
      const backlog = await deps.queues.callbackBacklog();
      callbackBacklog.set(backlog.length);
      callbackBacklogLimit.set(backlog.max);
      const owed = await deps.queues.callbacksOwed();
      callbackOwed.reset();
      for (const lane of deps.lanes) callbackOwed.set({ lane: lane.name }, owed[lane.name] ?? 0);
      callbackOwedLimit.set(deps.queues.laneCallbackBacklogMax);
      scrapeOk.set(1);
    } catch {
      scrapeOk.set(0);
    }
  }
  async function exposition(): Promise<string> {
    await refresh();
    return withoutBlankLines(await registry.metrics());
  }
  return { registry, refresh, exposition };
}
