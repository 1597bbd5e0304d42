import { randomBytes } from 'node:crypto';
import { Job } from 'bullmq';
import type { Redis } from 'ioredis';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LaneConfigSchema } from '@lanes/contracts';
import { CardStore, LaneQueues, createRedis, keys } from '@lanes/queue';
import { activeTraceparent, activeTraceMetadata, inSpan, startTracing, type Tracing } from '@lanes/tracing';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';
import { cardTrace, rememberCardTrace, withTraceMetadata, withTraceOption } from '../src/job-trace.js';

const OPTS = JSON.stringify({ jobId: 'c1', attempts: 2, priority: 0 });

describe('a job carries its trace as BullMQ telemetry metadata', () => {
  it('with tracing off, the options are left as they are', () => {
    expect(withTraceMetadata(OPTS)).toBe(OPTS);
    expect(withTraceOption({ attempts: 1 })).toEqual({ attempts: 1 });
  });

  describe('with tracing on', () => {
    let tracing: Tracing;
    beforeAll(async () => {
      tracing = await startTracing({ env: {}, exporter: new InMemorySpanExporter() });
    });
    afterAll(() => tracing.shutdown());

    it('outside any span, adds nothing', () => {
      expect(withTraceMetadata(OPTS)).toBe(OPTS);
    });

    it('stores the active span as `tm`, which BullMQ reads back as telemetry.metadata', async () => {
      const { stored, option, metadata } = await inSpan('enqueue', {}, async () => ({
        stored: withTraceMetadata(OPTS),
        option: withTraceOption({ attempts: 1 }),
        metadata: activeTraceMetadata(),
      }));
      expect(JSON.parse(stored)).toEqual({ ...JSON.parse(OPTS), tm: metadata });
      expect(Job.optsFromJSON(stored).telemetry).toEqual({ metadata });
      expect(option).toEqual({ attempts: 1, telemetry: { metadata } });
    });
  });
});

describe('the trace reaches the job on every job writer, on real Redis', () => {
  let server: TestRedis;
  let redis: Redis;
  let tracing: Tracing;
  beforeAll(async () => {
    tracing = await startTracing({ env: {}, exporter: new InMemorySpanExporter() });
    server = await startRedis();
    redis = createRedis(server.url);
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
    await tracing?.shutdown();
  });

  /** The trace id of the telemetry metadata stored in a job's options. */
  const jobTrace = async (lane: string, id: string) => {
    const tm = (JSON.parse((await redis.hget(keys.job(lane, id), 'opts')) ?? '{}') as { tm?: string }).tm;
    return tm === undefined ? undefined : (JSON.parse(tm) as { traceparent: string }).traceparent.split('-')[1];
  };

  it.each([
    ['lanes writes the jobs (its enqueue script)', true],
    ["BullMQ's add (a MULTI for a batch, Queue.add for one card)", false],
  ])('%s', async (_label, writeJobs) => {
    const lane = LaneConfigSchema.parse({ name: `tr-${randomBytes(3).toString('hex')}`, agent: ['true'] });
    const queues = new LaneQueues({ redis, store: new CardStore({ redis, now: Date.now }), lanes: [lane], writeJobs });
    try {
      const id = (n: number) => `${lane.name}-${n}`;
      const traceId = await inSpan('cards.enqueue', {}, async () => {
        await queues.enqueueMany([1, 2].map((n) => ({ id: id(n), lane: lane.name, title: 't', priority: 0 })));
        await queues.enqueueMany([{ id: id(3), lane: lane.name, title: 't', priority: 0 }]);
        return activeTraceparent()!.split('-')[1];
      });
      for (const n of [1, 2, 3]) expect(await jobTrace(lane.name, id(n))).toBe(traceId);
      // Outside any span: lanes' script writes no trace (the run starts one); BullMQ's add starts one at its own producer span.
      await queues.enqueueMany([{ id: id(4), lane: lane.name, title: 't', priority: 0 }]);
      const outside = await jobTrace(lane.name, id(4));
      if (writeJobs) expect(outside).toBeUndefined();
      else {
        expect(outside).toMatch(/^[0-9a-f]{32}$/);
        expect(outside).not.toBe(traceId);
      }
    } finally {
      await queues.close();
    }
  });

  it("notes a run's traceparent only on a card that exists", async () => {
    const traceparent = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
    await rememberCardTrace(redis, 'no-such-card', traceparent);
    expect(await redis.exists(keys.card('no-such-card'))).toBe(0);
    await redis.hset(keys.card('a-card'), 'state', 'running');
    await rememberCardTrace(redis, 'a-card', traceparent);
    expect(await cardTrace(redis, 'a-card')).toBe(traceparent);
  });
});
