import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CardRecord, LaneConfigInput } from '@lanes/contracts';
import { apiClient, spawnWorker, startRedis, startTestStack, waitFor, type ApiClient, type TestRedis, type TestStack, type WorkerProcess } from '../harness/index.js';

const TOKEN = 'keda-loop-token';
const CARDS = 200;
/**
 * The last cards of the burst run long: while only they are left, the desired count drops and the
 * loop removes workers that hold them, so a scale-down meets running cards (the HPA may remove a
 * replica mid-card). The script is fixed; the card id reaches it only as an env var.
 */
const LONG_CARDS = 3;
const AGENT_SCRIPT = 'case "$LANES_CARD_ID" in keda-long-*) sleep 5 ;; *) sleep 0.5 ;; esac';
/** 2 slots per worker and at most 8 slots for the lane: KEDA runs 1..4 workers. */
const lane: LaneConfigInput = {
  name: 'keda',
  slots: 2,
  minSlots: 1,
  maxSlots: 8,
  agent: ['sh', '-c', AGENT_SCRIPT],
  attempts: 1,
  killGraceMs: 100,
  slotScaling: { cooldownMs: 200, downDelayMs: 1_000 },
};
const MIN_WORKERS = 1;
const MAX_WORKERS = 4;
/** KEDA's pollingInterval, shortened. */
const POLL_MS = 250;
/** The HPA's scale-down stabilization, shortened: fewer workers only after the lower count held this long. */
const DOWN_STABILIZATION_MS = 1_500;

interface Tracked {
  proc: WorkerProcess;
  pid: number;
  exited: Promise<void>;
  stopping: boolean;
}

/**
 * The test plays KEDA: it polls GET /v1/lanes/:lane/scale with the API token and starts or
 * SIGTERMs real `lanes worker` processes to match, between MIN_WORKERS and MAX_WORKERS, under a
 * burst of 200 cards. The fleet grows to the maximum and shrinks to the minimum when idle; no
 * card is lost, and no scale-down spends an attempt (the lane allows one).
 */
describe('KEDA loop: the scale endpoint drives a fleet of real worker processes', () => {
  let redis: TestRedis;
  let dir: string;
  let t: TestStack;
  let api: ApiClient;
  const workers: Tracked[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    dir = mkdtempSync(join(tmpdir(), 'lanes-keda-'));
    // The API and supervisor only: every card runs in a worker process the loop started.
    t = await startTestStack(redis.url, [lane], { tokens: [TOKEN], parts: { api: true, supervisor: true, worker: false }, sandboxDir: join(dir, 'sandboxes') });
    api = apiClient(t.stack.url!, TOKEN);
  });
  afterAll(async () => {
    // Only the processes this test started, by the pids it holds.
    for (const w of workers) if (!w.stopping) w.proc.child.kill('SIGTERM');
    await Promise.all(workers.map((w) => w.exited));
    await t?.stop();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const running = () => workers.filter((w) => !w.stopping);
  const alive = () => workers.filter((w) => w.proc.child.exitCode === null && w.proc.child.signalCode === null);

  const start = () => {
    const proc = spawnWorker({
      dir,
      redisUrl: redis.url,
      sandboxDir: join(dir, 'sandboxes'),
      lanes: [lane],
      env: { LANES_HEARTBEAT_INTERVAL_MS: '500' },
    });
    const exited = new Promise<void>((resolve) => proc.child.once('exit', () => resolve()));
    workers.push({ proc, pid: proc.child.pid!, exited, stopping: false });
  };

  /** Cards each worker process holds, from GET /v1/lanes (a worker id carries its pid: host-pid-nonce). */
  const cardsHeldByPid = async (): Promise<Map<number, number>> => {
    const held = new Map<number, number>();
    for (const slot of (await api.lanes()).flatMap((l) => l.slots)) {
      const pid = Number(/-(\d+)-[0-9a-f]{8}$/.exec(slot.worker)?.[1]);
      if (slot.cardId && pid) held.set(pid, (held.get(pid) ?? 0) + 1);
    }
    return held;
  };

  const desiredWorkers = async (): Promise<number> => {
    const res = await fetch(`${t.stack.url}/v1/lanes/${lane.name}/scale`, { headers: { authorization: `Bearer ${TOKEN}` } });
    expect(res.status).toBe(200);
    return ((await res.json()) as { desiredWorkers: number }).desiredWorkers;
  };

  it('grows to the max under 200 cards, shrinks to the min idle: 0 lost, 0 attempts spent by a drain', async () => {
    let peak = 0;
    let lowSince: number | undefined;
    let stop = false;
    // The KEDA role, as one loop: read the metric, clamp, scale up at once, scale down once stable.
    const loop = (async () => {
      while (!stop) {
        const desired = Math.min(MAX_WORKERS, Math.max(MIN_WORKERS, await desiredWorkers()));
        const current = running().length;
        if (desired > current) {
          lowSince = undefined;
          for (let i = current; i < desired; i++) start();
        } else if (desired < current) {
          lowSince ??= Date.now();
          if (Date.now() - lowSince >= DOWN_STABILIZATION_MS) {
            // The worst case for a drain: the workers holding the most cards go first.
            const held = await cardsHeldByPid();
            const victims = [...running()].sort((a, b) => (held.get(b.pid) ?? 0) - (held.get(a.pid) ?? 0)).slice(0, current - desired);
            for (const w of victims) {
              w.stopping = true;
              w.proc.child.kill('SIGTERM');
            }
            lowSince = undefined;
          }
        } else lowSince = undefined;
        peak = Math.max(peak, running().length);
        await new Promise((r) => setTimeout(r, POLL_MS));
      }
    })();

    try {
      await waitFor('the first worker', () => running().length === MIN_WORKERS);
      const ids = [...Array.from({ length: CARDS - LONG_CARDS }, (_, i) => `keda-${i}`), ...Array.from({ length: LONG_CARDS }, (_, i) => `keda-long-${i}`)];
      const posted = await api.request('POST', '/v1/cards', { cards: ids.map((id) => ({ id, lane: lane.name, title: id })) });
      expect(posted.status).toBe(202);

      // The lane's counts, not 200 card reads per poll: the loop and the fleet share two cores.
      await waitFor('all 200 cards completed', async () => (await api.lanes()).find((l) => l.name === lane.name)?.counts.completed === CARDS, {
        timeoutMs: 90_000,
        intervalMs: 250,
      });
      const cards = (await Promise.all(ids.map((id) => api.card(id)))) as CardRecord[];
      for (const card of cards) expect(card.state, card.id).toBe('done');
      expect(peak).toBe(MAX_WORKERS);

      // Idle: back to the minimum, and the workers told to go have drained and exited.
      await waitFor('the fleet back at the minimum', () => running().length === MIN_WORKERS && alive().length === MIN_WORKERS, { timeoutMs: 30_000, intervalMs: 100 });
      expect(workers.length).toBeGreaterThanOrEqual(MAX_WORKERS);

      // 0 lost: every card done exactly once. 0 interrupted: still attempt 1 (the lane allows one),
      // and any second run follows a drain's hand-back, never a crash or a stall.
      let handedBack = 0;
      for (const card of cards) {
        expect(
          card.history.filter((h) => h.state === 'done'),
          card.id,
        ).toHaveLength(1);
        expect(card.attempts, card.id).toBe(1);
        const runs = card.history.filter((h) => h.state === 'running');
        expect(
          runs.map((h) => h.attempt),
          card.id,
        ).toEqual(runs.map(() => 1));
        const handBacks = card.history.filter((h) => h.state === 'queued' && h.message === 'handed back on shutdown').length;
        expect(runs.length, card.id).toBe(1 + handBacks);
        handedBack += handBacks;
      }
      // The scale-down met running cards, and handed them back rather than failing them.
      expect(handedBack).toBeGreaterThanOrEqual(1);
      const counts = await t.stack.api!.queues.queue(lane.name)!.getJobCounts('completed', 'failed', 'active', 'waiting', 'delayed');
      expect(counts).toMatchObject({ completed: CARDS, failed: 0, active: 0, waiting: 0, delayed: 0 });
      console.info(`keda loop: ${workers.length} workers started, peak ${peak}, ${handedBack} card runs handed back by a drain`);
    } finally {
      stop = true;
      await loop;
    }
  }, 150_000);
});
