import { createServer } from 'node:http';
import { InMemorySpanExporter } from '@opentelemetry/sdk-trace-node';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { waitFor } from '../../../test/harness/index.js';
import {
  activeTraceMetadata,
  activeTraceparent,
  bullmqTelemetry,
  contextOfTraceMetadata,
  contextOfTraceparent,
  inSpan,
  otlpEndpointOf,
  otlpHeadersOf,
  SDK_MESSAGE_MAX_CHARS,
  startTracing,
  tracingEnabled,
  traceparentOf,
  type Tracing,
} from '../src/index.js';

const TRACEPARENT = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;

describe('tracing off (no OTEL_EXPORTER_OTLP_ENDPOINT): nothing started, nothing recorded', () => {
  it('starts no SDK and leaves every helper a pass-through', async () => {
    const tracing = await startTracing({ env: {} });
    expect(tracing.enabled).toBe(false);
    expect(tracingEnabled()).toBe(false);
    expect(bullmqTelemetry()).toEqual({});
    expect(await inSpan('x', {}, async (span) => span)).toBeUndefined();
    expect(activeTraceparent()).toBeUndefined();
    expect(activeTraceMetadata()).toBeUndefined();
    expect(contextOfTraceparent('00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01')).toBeUndefined();
    await tracing.shutdown();
  });

  it.each([
    [{}, undefined],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: '' }, undefined],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }, 'http://collector:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }, 'http://collector:4318/v1/traces'],
    [{ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://c:4318/v1/traces' }, 'http://c:4318/v1/traces'],
  ])('otlpEndpointOf(%j) is %s', (env, endpoint) => {
    expect(otlpEndpointOf(env)).toBe(endpoint);
  });

  it('reads the collector headers as the SDK does', () => {
    expect(otlpHeadersOf({ OTEL_EXPORTER_OTLP_HEADERS: 'api-key=a%3Db, x-tenant = t1,broken' })).toEqual({ 'api-key': 'a=b', 'x-tenant': 't1' });
    expect(otlpHeadersOf({})).toEqual({});
  });
});

describe('tracing on', () => {
  let tracing: Tracing | undefined;
  // A shutdown stops its exporter too: each test has its own.
  let exporter: InMemorySpanExporter;
  beforeEach(() => {
    exporter = new InMemorySpanExporter();
  });
  afterEach(async () => {
    await tracing?.shutdown();
    tracing = undefined;
  });

  it('nests spans through awaits and names the active one as a W3C traceparent', async () => {
    tracing = await startTracing({ env: {}, exporter });
    const seen = await inSpan('outer', {}, async (outer) =>
      inSpan('inner', { attributes: { k: 'v' } }, async (inner) => {
        await new Promise((r) => setImmediate(r));
        return { outer: traceparentOf(outer), inner: traceparentOf(inner), active: activeTraceparent() };
      }),
    );
    expect(seen.inner).toMatch(TRACEPARENT);
    expect(seen.active).toBe(seen.inner);
    const [inner, outer] = exporter.getFinishedSpans();
    expect(inner!.name).toBe('inner');
    expect(inner!.parentSpanContext?.spanId).toBe(outer!.spanContext().spanId);
    expect(inner!.spanContext().traceId).toBe(outer!.spanContext().traceId);
  });

  it('carries the context through a traceparent and through BullMQ telemetry metadata', async () => {
    tracing = await startTracing({ env: {}, exporter });
    const { traceparent, metadata } = await inSpan('enqueue', {}, async () => ({ traceparent: activeTraceparent(), metadata: activeTraceMetadata() }));
    expect(JSON.parse(metadata!)).toEqual({ traceparent });
    const traceId = traceparent!.split('-')[1];
    for (const parent of [contextOfTraceparent(traceparent), contextOfTraceMetadata(metadata)]) {
      await inSpan('run', { parent: parent! }, async () => undefined);
      expect(exporter.getFinishedSpans().at(-1)!.spanContext().traceId).toBe(traceId);
    }
    expect(contextOfTraceMetadata('not json')).toBeUndefined();
    expect(contextOfTraceparent('00-garbage')).toBeUndefined();
  });

  it('marks a throw an error unless throwing is how the step answers', async () => {
    tracing = await startTracing({ env: {}, exporter });
    await expect(inSpan('fails', {}, async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(inSpan('answers', { errorOnThrow: false }, async () => Promise.reject(new Error('delayed')))).rejects.toThrow('delayed');
    const [fails, answers] = exporter.getFinishedSpans();
    expect(fails!.status).toMatchObject({ code: 2, message: 'boom' });
    expect(answers!.status.code).toBe(0);
  });

  it("keeps what an agent wrote (a job's result, its failure reason) off BullMQ's spans", async () => {
    tracing = await startTracing({ env: {}, exporter });
    const { telemetry } = bullmqTelemetry();
    const span = telemetry!.tracer.startSpan('process lane', { kind: 4 });
    span.setAttributes({ 'bullmq.job.id': 'c1', 'bullmq.job.result': '{"token":"agent-secret"}' });
    span.addEvent('job failed', { 'bullmq.job.failed.reason': 'agent exited 1: agent-secret' });
    span.recordException(new Error('agent-secret'));
    span.end();
    const [exported] = exporter.getFinishedSpans();
    expect(exported!.attributes['bullmq.job.id']).toBe('c1');
    expect(JSON.stringify([exported!.attributes, exported!.events])).not.toContain('agent-secret');
    expect(exported!.events.map((e) => e.name)).toEqual(['job failed', 'exception']);
  });

  it('is started once per process, and off again after shutdown', async () => {
    tracing = await startTracing({ env: {}, exporter });
    expect(bullmqTelemetry().telemetry).toBeDefined();
    await expect(startTracing({ env: {}, exporter })).rejects.toThrow('already started');
    await tracing.shutdown();
    tracing = undefined;
    expect(tracingEnabled()).toBe(false);
    expect(await inSpan('after', {}, async (span) => span)).toBeUndefined();
  });
});

describe('OTLP export (OTEL_EXPORTER_OTLP_ENDPOINT)', () => {
  it('stops cleanly when the collector is away, saying the last spans were lost', async () => {
    const errors: unknown[] = [];
    const port = await new Promise<number>((resolve) => {
      const probe = createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as { port: number }).port;
        probe.close(() => resolve(p));
      });
    });
    const tracing = await startTracing({ env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${port}` }, onShutdownError: (err) => errors.push(err) });
    await inSpan('lost', {}, async () => undefined);
    await expect(tracing.shutdown()).resolves.toBeUndefined();
    expect(String(errors[0])).toContain('ECONNREFUSED');
    expect(tracingEnabled()).toBe(false);
  });

  it('says so while it runs when the collector refuses a batch, each message cut to its cap', async () => {
    // A collector that refuses every batch with a long body (outside input).
    const collector = createServer((req, res) => {
      req.resume();
      req.on('end', () => res.writeHead(400, { 'content-type': 'text/plain' }).end('x'.repeat(20_000)));
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
    const messages: Array<{ level: string; message: string }> = [];
    let tracing: Tracing | undefined;
    try {
      tracing = await startTracing({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(collector.address() as { port: number }).port}` },
        onSdkMessage: (level, message) => messages.push({ level, message }),
        onShutdownError: () => undefined,
      });
      // A full batch (the SDK's maxExportBatchSize, 512) is exported at once, not at the next 5 s tick.
      for (let i = 0; i < 512; i++) await inSpan(`refused.${i}`, {}, async () => undefined);
      const first = await waitFor('the refused batch reported', async () => messages[0]);
      expect(first.level).toBe('error');
      expect(first.message.length).toBeLessThanOrEqual(SDK_MESSAGE_MAX_CHARS);
      expect(first.message.length).toBeGreaterThan(0);
    } finally {
      await tracing?.shutdown();
      collector.close();
    }
  });

  it('posts the spans as OTLP http/protobuf to <endpoint>/v1/traces, flushed at shutdown', async () => {
    const received: Array<{ url: string; type: string; auth: string; body: Buffer }> = [];
    const collector = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        received.push({ url: req.url ?? '', type: String(req.headers['content-type']), auth: String(req.headers.authorization), body: Buffer.concat(chunks) });
        res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end();
      });
    });
    await new Promise<void>((r) => collector.listen(0, '127.0.0.1', r));
    const endpoint = `http://127.0.0.1:${(collector.address() as { port: number }).port}`;
    try {
      const tracing = await startTracing({
        env: { OTEL_EXPORTER_OTLP_ENDPOINT: endpoint, OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Bearer%20collector-token', OTEL_SERVICE_NAME: 'lanes-test' },
      });
      expect(tracing.enabled).toBe(true);
      const traceparent = await inSpan('exported.span', {}, async () => activeTraceparent());
      await tracing.shutdown();
      expect(received).toHaveLength(1);
      const [{ url, type, auth, body }] = received as [(typeof received)[0]];
      expect(url).toBe('/v1/traces');
      expect(auth).toBe('Bearer collector-token');
      expect(type).toBe('application/x-protobuf');
      // Protobuf keeps strings as UTF-8 and ids as raw bytes: the span's name, the service and its trace id are in the body.
      expect(body.includes(Buffer.from('exported.span'))).toBe(true);
      expect(body.includes(Buffer.from('lanes-test'))).toBe(true);
      expect(body.includes(Buffer.from(traceparent!.split('-')[1]!, 'hex'))).toBe(true);
    } finally {
      collector.close();
    }
  });
});
