import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { QUEUE_PREFIX } from '@lanes/queue';
import { startRedis, startTestStack, waitFor, type TestRedis, type TestStack } from '../harness/index.js';

/** The foundation path: a PR card from HTTP to done on real local sandboxes and a real Redis. */
describe('card flow on the embedded default', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [{ name: 'demo', slots: 2, agent: [process.execPath, DEMO_AGENT], attempts: 2, commandTimeoutMs: 30_000, killGraceMs: 200 }]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('runs a posted card to done, with a commit and a history of every transition', async () => {
    const post = await t.api.request<{ id: string; state: string }>('POST', '/v1/cards', {
      id: 'flow-1',
      lane: 'demo',
      title: 'Fix flaky test',
      prompt: 'make $(rm -rf /) `whoami` ; it pass',
      pr: { number: 12, branch: 'fix/flaky', base: 'main' },
      metadata: { board: 'kanban', column: 7 },
    });
    expect(post.status).toBe(202);
    expect(post.body).toEqual({ id: 'flow-1', state: 'queued' });

    const card = await t.api.waitCard('flow-1', 'done', (c) => c.state === 'done');
    expect(card.history.map((h) => h.state)).toEqual(['queued', 'running', 'done']);
    expect(card.attempts).toBe(1);
    expect(card.infraRetries).toBe(0);
    expect(card.sandboxId).toBeTruthy();
    const result = card.result as { branch: string; commit: string; files: string[] };
    expect(result.branch).toBe('fix/flaky');
    expect(result.commit).toMatch(/^[0-9a-f]{40}$/);
    expect(result.files).toEqual(['cards/flow-1.md']);
    for (const h of card.history) expect(Date.parse(h.at)).not.toBeNaN();
    expect(card.history[1]!.sandboxId).toBe(card.sandboxId);
    // The agent's output streamed into the BullMQ job log, where Bull Board shows it.
    const logs = await t.stack.api!.queues.queue('demo')!.getJobLogs('flow-1');
    expect(logs.logs.join('\n')).toContain(`committed ${result.commit} on fix/flaky`);
  });

  it('re-posting an existing id returns 200 and does not run it twice', async () => {
    const again = await t.api.request<{ id: string; state: string }>('POST', '/v1/cards', { id: 'flow-1', lane: 'demo', title: 'Fix flaky test' });
    expect(again.status).toBe(200);
    expect(again.body).toEqual({ id: 'flow-1', state: 'done' });
    // A later card finishing proves the worker had time to run a duplicate, had there been one.
    await t.api.request('POST', '/v1/cards', { id: 'flow-1b', lane: 'demo', title: 'after' });
    await t.api.waitCard('flow-1b', 'done', (c) => c.state === 'done');
    const card = await t.api.card('flow-1');
    expect(card.history.filter((h) => h.state === 'running')).toHaveLength(1);
  });

  it('re-posting a done card whose BullMQ job was removed (removeOnComplete) adds no job and never runs it again', async () => {
    const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue('demo', { connection: conn, prefix: QUEUE_PREFIX });
    try {
      // What removeOnComplete does once the completed job is old or many enough.
      await (await queue.getJob('flow-1'))!.remove();
      expect(await queue.getJob('flow-1')).toBeUndefined();
      const again = await t.api.request<{ cards: Array<{ id: string; state: string; created: boolean }> }>('POST', '/v1/cards', {
        cards: [
          { id: 'flow-1', lane: 'demo', title: 'Fix flaky test' },
          { id: 'flow-1c', lane: 'demo', title: 'after' },
        ],
      });
      expect(again.status).toBe(202);
      expect(again.body.cards[0]).toEqual({ id: 'flow-1', state: 'done', created: false });
      expect(await queue.getJob('flow-1')).toBeUndefined();
      await t.api.waitCard('flow-1c', 'done', (c) => c.state === 'done');
      const card = await t.api.card('flow-1');
      expect(card.history.filter((h) => h.state === 'running')).toHaveLength(1);
      expect(await queue.getJob('flow-1')).toBeUndefined();
    } finally {
      await queue.close();
      conn.disconnect();
    }
  });

  it('refuses malformed bodies with 400 naming the field', async () => {
    const bad = await t.api.request<{ error: { code: string; message: string; issues: Array<{ path: string }> } }>('POST', '/v1/cards', {
      lane: 'demo',
      title: 'x',
      pr: { number: 'twelve', branch: 'b' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error.code).toBe('CARD_INVALID');
    expect(bad.body.error.issues.map((i) => i.path)).toContain('pr.number');
    expect(bad.body.error.message).toContain('pr.number');

    const noTitle = await t.api.request<{ error: { issues: Array<{ path: string }> } }>('POST', '/v1/cards', { lane: 'demo' });
    expect(noTitle.status).toBe(400);
    expect(noTitle.body.error.issues.map((i) => i.path)).toContain('title');

    const unknownLane = await t.api.request<{ error: { message: string; issues: Array<{ path: string }> } }>('POST', '/v1/cards', { lane: 'nope', title: 't' });
    expect(unknownLane.status).toBe(400);
    expect(unknownLane.body.error.issues[0]!.path).toBe('lane');

    const bulk = await t.api.request<{ error: { issues: Array<{ path: string }> } }>('POST', '/v1/cards', {
      cards: [
        { lane: 'demo', title: 'ok' },
        { lane: 'demo', title: 'bad', id: 'has:colon' },
      ],
    });
    expect(bulk.status).toBe(400);
    expect(bulk.body.error.issues.map((i) => i.path)).toContain('cards.1.id');

    const notJson = await t.api.request<{ error: { code: string } }>('POST', '/v1/cards', '{"lane":', { 'content-type': 'application/json' });
    expect(notJson.status).toBe(400);
    expect(notJson.body.error.code).toBeTruthy();
  });

  it('accepts a bulk post and runs every card', async () => {
    const res = await t.api.request<{ cards: Array<{ id: string; created: boolean }> }>('POST', '/v1/cards', {
      cards: [
        { id: 'bulk-1', lane: 'demo', title: 'one' },
        { id: 'bulk-2', lane: 'demo', title: 'two' },
        { id: 'flow-1', lane: 'demo', title: 'existing' },
      ],
    });
    expect(res.status).toBe(202);
    expect(res.body.cards.map((c) => [c.id, c.created])).toEqual([
      ['bulk-1', true],
      ['bulk-2', true],
      ['flow-1', false],
    ]);
    await t.api.waitCard('bulk-1', 'done', (c) => c.state === 'done');
    await t.api.waitCard('bulk-2', 'done', (c) => c.state === 'done');
  });

  it('fails a malformed raw BullMQ job with a readable reason and keeps serving the lane', async () => {
    const conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue('demo', { connection: conn, prefix: QUEUE_PREFIX });
    try {
      const job = await queue.add('raw', { title: 42, pr: { number: -1 } }, { jobId: 'raw-bad' });
      const failedReason = await waitFor('raw job to fail', async () => {
        const j = await queue.getJob(job.id!);
        return (await j?.getState()) === 'failed' ? j!.failedReason : undefined;
      });
      expect(failedReason).toContain('invalid card');
      expect(failedReason).toContain('title');
      expect(failedReason).toContain('pr.number');
      const failed = await queue.getJob('raw-bad');
      expect(failed!.attemptsMade).toBeLessThanOrEqual(1);

      // A board that speaks BullMQ: a valid raw job (lane implied by the queue) reaches done.
      await queue.add('raw', { title: 'raw but fine' }, { jobId: 'raw-good' });
      const card = await t.api.waitCard('raw-good', 'done', (c) => c.state === 'done');
      expect(card.lane).toBe('demo');
    } finally {
      await queue.close();
      conn.disconnect();
    }
  });

  it('blocks a needs-human card and releases it on unblock without spending attempts', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'human-1', lane: 'demo', title: 'needs a person', metadata: { needsHuman: 'which branch?' } });
    const blocked = await t.api.waitCard('human-1', 'blocked', (c) => c.state === 'blocked');
    expect(blocked.blockedReason).toBe('needs-human');
    expect(blocked.blockedMessage).toBe('which branch?');
    const res = await t.api.request('POST', '/v1/cards/human-1/unblock', { note: 'use main' });
    expect(res.status).toBe(202);
    const again = await t.api.waitCard('human-1', 'blocked again', (c) => c.history.filter((h) => h.state === 'blocked').length === 2);
    expect(again.history.some((h) => h.message === 'unblocked: use main')).toBe(true);
    expect(again.attempts).toBe(1);
    const notBlocked = await t.api.request<{ error: { code: string } }>('POST', '/v1/cards/flow-1/unblock', {});
    expect(notBlocked.status).toBe(409);
  });

  it('fails a card whose agent keeps failing after the lane attempts', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'fail-1', lane: 'demo', title: 'doomed', metadata: { fail: 'on purpose' } });
    const card = await t.api.waitCard('fail-1', 'failed', (c) => c.state === 'failed');
    expect(card.failedReason).toBe('command-failed');
    expect(card.attempts).toBe(2);
    expect(card.history.filter((h) => h.state === 'running')).toHaveLength(2);
    expect(card.history.at(-1)!.message).toContain('failing on purpose');
  });

  it('cancel kills the command, not the sandbox: the next card runs in the same sandbox', async () => {
    await t.api.request('POST', '/v1/cards', { id: 'cancel-1', lane: 'demo', title: 'long', metadata: { sleepMs: 30_000 } });
    const running = await t.api.waitCard('cancel-1', 'running', (c) => c.state === 'running');
    const res = await t.api.request('POST', '/v1/cards/cancel-1/cancel');
    expect(res.status).toBe(202);
    const cancelled = await t.api.waitCard('cancel-1', 'cancelled', (c) => c.state === 'cancelled', 10_000);
    expect(cancelled.sandboxId).toBe(running.sandboxId);
    const lane = (await t.api.lanes())[0]!;
    const slot = lane.slots.find((s) => s.sandbox?.id === running.sandboxId);
    expect(slot?.sandbox?.state).toBe('live');
    const again = await t.api.request('POST', '/v1/cards/cancel-1/cancel');
    expect(again.status).toBe(409);
  });

  it('cancels a queued card before it runs', async () => {
    // Fill both slots, then queue a third card and cancel it while it waits.
    await t.api.request('POST', '/v1/cards', { cards: [0, 1].map((i) => ({ id: `busy-${i}`, lane: 'demo', title: 'busy', metadata: { sleepMs: 3_000 } })) });
    await t.api.waitCard('busy-0', 'running', (c) => c.state === 'running');
    await t.api.waitCard('busy-1', 'running', (c) => c.state === 'running');
    await t.api.request('POST', '/v1/cards', { id: 'queued-cancel', lane: 'demo', title: 'never runs' });
    const res = await t.api.request('POST', '/v1/cards/queued-cancel/cancel');
    expect(res.status).toBe(202);
    const card = await t.api.waitCard('queued-cancel', 'cancelled', (c) => c.state === 'cancelled');
    expect(card.history.some((h) => h.state === 'running')).toBe(false);
  });

  it('reports lanes with counts and each slot sandbox {id, state, pid}', async () => {
    const lanes = await t.api.lanes();
    expect(lanes.map((l) => l.name)).toEqual(['demo']);
    const lane = lanes[0]!;
    expect(lane.slots).toHaveLength(2);
    for (const slot of lane.slots) {
      expect(slot.sandbox?.state).toBe('live');
      expect(slot.sandbox?.pid).toBeGreaterThan(1);
      expect(slot.sandbox?.id).toBeTruthy();
    }
    expect(lane.counts.completed).toBeGreaterThanOrEqual(1);
    expect(lane.breaker.state).toBe('closed');
    expect(lane.outage).toBe(false);
  });

  it('serves Bull Board at /admin/queues listing every lane queue, plus health and metrics', async () => {
    const page = await t.api.request('GET', '/admin/queues');
    expect(page.status).toBe(200);
    expect(page.text).toContain('<html');
    // The page's own assets load too (the UI is a bundle served from the board's static path).
    const assets = [...page.text.matchAll(/(?:src|href)="(static\/[^"]+\.(?:js|css))"/g)].map((m) => m[1]!);
    expect(assets.length).toBeGreaterThan(0);
    for (const asset of assets) expect((await t.api.request('GET', `/admin/queues/${asset}`)).status, asset).toBe(200);
    const queues = await t.api.request<{ queues: Array<{ name: string }> }>('GET', '/admin/queues/api/queues');
    expect(queues.status).toBe(200);
    expect(queues.body.queues.map((q) => q.name)).toEqual(['demo']);
    expect((await t.api.request('GET', '/healthz')).status).toBe(200);
    expect((await t.api.request('GET', '/readyz')).status).toBe(200);
    const metrics = await t.api.request('GET', '/metrics');
    expect(metrics.text).toContain('lanes_cards{lane="demo",state="completed"}');
    expect(metrics.text).toContain('lanes_desired_slots{lane="demo"}');
    // Idle lane: desired slots sit at minSlots (2: a lane given only `slots` is fixed), which one worker of 2 slots covers.
    expect(metrics.text).toMatch(/^lanes_desired_workers 1$/m);
    // One prefix, not two, and an exposition without blank lines.
    expect(metrics.text).toMatch(/^lanes_process_cpu_seconds_total /m);
    expect(metrics.text).toMatch(/^lanes_nodejs_heap_size_total_bytes /m);
    expect(metrics.text).not.toContain('process_process');
    expect(metrics.text.split('\n').slice(0, -1)).not.toContain('');
    expect(metrics.text.endsWith('\n')).toBe(true);
  });

  it('answers unknown routes and cards with the error body', async () => {
    const missing = await t.api.request<{ error: { code: string } }>('GET', '/v1/cards/nope');
    expect(missing.status).toBe(404);
    expect(missing.body.error.code).toBe('NOT_FOUND');
  });
});

describe('card ids across lanes', () => {
  let redis: TestRedis;
  let t: TestStack;

  beforeAll(async () => {
    redis = await startRedis();
    t = await startTestStack(redis.url, [
      { name: 'left', slots: 1, agent: [process.execPath, DEMO_AGENT] },
      { name: 'right', slots: 1, agent: [process.execPath, DEMO_AGENT] },
    ]);
  });
  afterAll(async () => {
    await t?.stop();
    await redis?.stop();
  });

  it('refuses an existing id posted for another lane with 409 naming the lane, single or bulk', async () => {
    expect((await t.api.request('POST', '/v1/cards', { id: 'shared-id', lane: 'left', title: 'first' })).status).toBe(202);
    const single = await t.api.request<{ error: { code: string; issues: Array<{ path: string; message: string }> } }>('POST', '/v1/cards', {
      id: 'shared-id',
      lane: 'right',
      title: 'second',
    });
    expect(single.status).toBe(409);
    expect(single.body.error.code).toBe('CARD_CONFLICT');
    expect(single.body.error.issues).toEqual([{ path: 'lane', message: 'card shared-id already exists on lane "left"' }]);
    const bulk = await t.api.request<{ error: { issues: Array<{ path: string }> } }>('POST', '/v1/cards', {
      cards: [
        { id: 'fresh-id', lane: 'right', title: 'ok' },
        { id: 'shared-id', lane: 'right', title: 'clash' },
      ],
    });
    expect(bulk.status).toBe(409);
    expect(bulk.body.error.issues.map((i) => i.path)).toEqual(['cards.1.lane']);
    // Nothing of a refused batch was queued.
    expect((await t.api.request('GET', '/v1/cards/fresh-id')).status).toBe(404);
    await t.api.waitCard('shared-id', 'done on its own lane', (c) => c.state === 'done' && c.lane === 'left');
  });
});
