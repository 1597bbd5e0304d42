import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseAllowRule, type CallbackAllowRule } from '@lanes/contracts';
import { QUEUE_PREFIX, keys } from '@lanes/queue';
import { startTracing, type Tracing } from '@lanes/tracing';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** An agent that answers the TRACEPARENT it was given as its result. */
const TRACEPARENT_AGENT = [
  process.execPath,
  '-e',
  "require('node:fs').writeFileSync(process.env.LANES_OUTPUT_DIR + '/result.json', JSON.stringify({ traceparent: process.env.TRACEPARENT ?? null }))",
];
const SECRET = 'callback-secret-for-tracing-tests';
const ALLOW = [parseAllowRule('127.0.0.1') as CallbackAllowRule];
const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-0[01]$/;

interface Delivery {
  event: string;
  cardId: string;
  headers: IncomingHttpHeaders;
}

/** A board on loopback that records each callback's event, card and headers. */
function board(): Promise<{ server: Server; url: string; received: Delivery[] }> {
  const received: Delivery[] = [];
  const server = createServer((req, res) => {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString()));
    req.on('end', () => {
      const body = JSON.parse(raw) as { event: string; card: { id: string } };
      received.push({ event: body.event, cardId: body.card.id, headers: req.headers });
      res.end();
    });
  });
  return new Promise((resolve) => server.listen(0, '127.0.0.1', () => resolve({ server, url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, received })));
}

/** The spans of one trace, by name; every span but the root has its parent in the trace. */
function traceOf(spans: readonly ReadableSpan[], traceId: string): Map<string, ReadableSpan[]> {
  const inTrace = spans.filter((s) => s.spanContext().traceId === traceId);
  const ids = new Set(inTrace.map((s) => s.spanContext().spanId));
  const byName = new Map<string, ReadableSpan[]>();
  for (const s of inTrace) byName.set(s.name, [...(byName.get(s.name) ?? []), s]);
  const roots = inTrace.filter((s) => !s.parentSpanContext || !ids.has(s.parentSpanContext.spanId));
  expect(roots.map((s) => s.name)).toHaveLength(1);
  return byName;
}

describe('traces: one trace per card, from POST to callback', () => {
  let redis: TestRedis;
  let t: TestStack;
  let b: Awaited<ReturnType<typeof board>>;
  let tracing: Tracing;
  const exporter = new InMemorySpanExporter();

  beforeAll(async () => {
    // Before the stack: its queues and workers take BullMQ's telemetry option only with tracing on.
    tracing = await startTracing({ env: {}, exporter });
    redis = await startRedis();
    b = await board();
    t = await startTestStack(redis.url, [{ name: 'traced', slots: 1, agent: TRACEPARENT_AGENT, attempts: 1 }], {
      callbacks: { secret: SECRET, retry: { maxAttempts: 3, baseDelayMs: 50 } },
      callbackAllow: ALLOW,
    });
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
    b?.server.close();
    await tracing?.shutdown();
  });

  /** The card's callback span, once its delivery of `event` ended. */
  const callbackSpan = (cardId: string, event: string) =>
    waitFor(`card.callback span of ${cardId}`, async () =>
      exporter.getFinishedSpans().find((s) => s.name === 'card.callback' && s.attributes['lanes.card.id'] === cardId && s.attributes['lanes.event'] === event),
    );

  it('POST, enqueue, queue wait, slot, run, sandbox exec, result and callback share one trace, and the agent sees a TRACEPARENT naming it', async () => {
    const posted = await t.api.request('POST', '/v1/cards', { id: 'traced-1', lane: 'traced', title: 'trace me', callbackUrl: `${b.url}/cb` });
    expect(posted.status).toBe(202);
    const card = await t.api.waitCard('traced-1', 'done', (c) => c.state === 'done');
    const callback = await callbackSpan('traced-1', 'card.done');

    const post = exporter.getFinishedSpans().find((s) => s.name === 'POST /v1/cards' && s.attributes['http.response.status_code'] === 202);
    expect(post).toBeDefined();
    const traceId = post!.spanContext().traceId;
    const spans = traceOf(exporter.getFinishedSpans(), traceId);
    for (const name of ['POST /v1/cards', 'cards.enqueue', 'process traced', 'card.queue-wait', 'card.slot', 'card.run', 'sandbox.exec', 'card.result', 'card.callback']) {
      expect(spans.has(name), `${name} in the card's trace (has: ${[...spans.keys()].join(', ')})`).toBe(true);
    }
    expect(callback.spanContext().traceId).toBe(traceId);
    expect(spans.get('card.result')![0]!.attributes['lanes.card.state']).toBe('done');

    // The agent's TRACEPARENT names the card's trace and the span of its own command.
    const [, agentTrace, agentSpan] = TRACEPARENT.exec((card.result as { traceparent: string }).traceparent) ?? [];
    expect(agentTrace).toBe(traceId);
    const agentExec = spans.get('sandbox.exec')!.find((s) => s.spanContext().spanId === agentSpan);
    expect(agentExec?.attributes['lanes.step']).toBe('agent');

    // The board's delivery carries the callback span's traceparent; no span holds the secret or the callback URL's path.
    const delivery = b.received.find((d) => d.cardId === 'traced-1' && d.event === 'card.done');
    expect(TRACEPARENT.exec(String(delivery?.headers.traceparent))?.[1]).toBe(traceId);
    const everything = JSON.stringify(exporter.getFinishedSpans().map((s) => [s.name, s.attributes, s.events]));
    expect(everything).not.toContain(SECRET);
    expect(everything).not.toContain(`${b.url}/cb`);
  });

  it("continues a board's own trace when its POST carries a traceparent", async () => {
    const boardTrace = '0af7651916cd43dd8448eb211c80319c';
    const posted = await t.api.request('POST', '/v1/cards', { id: 'traced-2', lane: 'traced', title: 'joined' }, { traceparent: `00-${boardTrace}-b7ad6b7169203331-01` });
    expect(posted.status).toBe(202);
    const card = await t.api.waitCard('traced-2', 'done', (c) => c.state === 'done');
    expect(TRACEPARENT.exec((card.result as { traceparent: string }).traceparent)?.[1]).toBe(boardTrace);
  });

  it('a job a board adds to the queue itself (no trace context) starts a new trace in which the agent and the callback join', async () => {
    const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue('traced', { connection: conn, prefix: QUEUE_PREFIX });
    try {
      await queue.add('raw', { title: 'raw job', callbackUrl: `${b.url}/raw` }, { jobId: 'traced-raw' });
      const card = await t.api.waitCard('traced-raw', 'done', (c) => c.state === 'done');
      const callback = await callbackSpan('traced-raw', 'card.done');
      const [, agentTrace] = TRACEPARENT.exec((card.result as { traceparent: string }).traceparent) ?? [];
      const spans = traceOf(exporter.getFinishedSpans(), agentTrace!);
      // Its root is BullMQ's process span: there was no POST, and the job carried no context.
      const process = spans.get('process traced')![0]!;
      expect(process.parentSpanContext).toBeUndefined();
      expect(spans.has('POST /v1/cards')).toBe(false);
      expect(callback.spanContext().traceId).toBe(agentTrace);
      // The run's trace is noted on the card, internally: the card record shows no such field.
      expect(await conn.hget(keys.card('traced-raw'), 'trace')).toMatch(TRACEPARENT);
      expect(Object.keys(card)).not.toContain('trace');
    } finally {
      await queue.close();
      conn.disconnect();
    }
  });
});
