import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseLanesConfig, type WorkerLiveness } from '@lanes/contracts';
import { CardStore, EventLog, FleetStore, LaneQueues, createRedis } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';
import { laneStatuses } from '../src/lane-status.js';

/** The API cannot watch beats itself: it shows what the supervisor published, and no verdict is unknown, never gone. */
describe('laneStatuses and the supervisor’s liveness verdicts (real Redis)', () => {
  let server: TestRedis;
  let redis: Redis;
  let queues: LaneQueues;
  let fleet: FleetStore;
  let store: CardStore;
  const lanes = parseLanesConfig({ lanes: [{ name: 'ls', slots: 3, agent: ['true'] }] }).lanes;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    fleet = new FleetStore(redis);
    const events = new EventLog(redis);
    store = new CardStore({ redis, events, now: Date.now });
    queues = new LaneQueues({ redis, store, lanes });
    for (const worker of ['w-alive', 'w-unknown', 'w-gone', 'w-unjudged']) {
      await fleet.putSlot('ls', { slot: '0', worker, sandbox: { id: `sb-${worker}`, state: 'live' } });
    }
  });
  afterAll(async () => {
    await queues?.close();
    redis?.disconnect();
    await server?.stop();
  });

  const shown = async () => {
    const [lane] = await laneStatuses({ queues, store, fleet, lanes });
    return Object.fromEntries(lane!.slots.map((s) => [s.worker, s.workerLiveness]));
  };

  it('with no supervisor verdicts at all every slot is listed as unknown', async () => {
    expect(await shown()).toEqual({ 'w-alive': 'unknown', 'w-gone': 'unknown', 'w-unjudged': 'unknown', 'w-unknown': 'unknown' });
  });

  it('hides only the slots of workers the supervisor judged gone', async () => {
    const verdict = (worker: string, liveness: WorkerLiveness) => ({ worker, liveness, reason: 'r' });
    await fleet.putLiveness([verdict('w-alive', 'alive'), verdict('w-unknown', 'unknown'), verdict('w-gone', 'gone')], 60_000);
    expect(await shown()).toEqual({ 'w-alive': 'alive', 'w-unjudged': 'unknown', 'w-unknown': 'unknown' });
  });
});
