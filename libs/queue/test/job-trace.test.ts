import { Job } from 'bullmq';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { activeTraceMetadata, inSpan, startTracing, type Tracing } from '@lanes/tracing';
import { withTraceMetadata, withTraceOption } from '../src/job-trace.js';

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
