import { createHash } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentLimits } from '@lanes/contracts';
import { LanesApiError, LanesClient, SseFrameParser, type EventGap } from '@lanes/client';
import { keys } from '@lanes/queue';
import { apiClient, startRedis, startTestStack, waitFor, type ApiClient, type TestRedis, type TestStack } from '../harness/index.js';

const ADMIN = 'admin-token-for-output';
const OTHER = 'other-lane-token-for-output';
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
/** A line every 100 ms, 30 in all (about 3 s). */
const TICKER = ['sh', '-c', 'for i in $(seq 1 30); do echo line-$i; sleep 0.1; done'];
const TICKER_LINES = Array.from({ length: 30 }, (_, i) => `line-${i + 1}`);
/** 1,900 lines of 1,000 characters (about 1.9 MB, over the 1 MiB the stream keeps, under the job log's 2,000 lines), then a last line. */
const FLOOD = ['sh', '-c', "i=0; while [ $i -lt 1900 ]; do printf '%01000d\\n' $i; i=$((i+1)); done; echo flood-end"];

interface Frame {
  id: string;
  event: string;
  lines?: string[];
  state?: string;
}

/** Reads a card's output stream as a client does, frame by frame, until it ends or `stop()`. */
function openOutput(url: string, id: string, headers: Record<string, string>) {
  const controller = new AbortController();
  const frames: Frame[] = [];
  const done = (async () => {
    const res = await fetch(`${url}/v1/cards/${id}/output`, { headers: { authorization: `Bearer ${ADMIN}`, ...headers }, signal: controller.signal });
    if (res.status !== 200) throw new Error(`output answered ${res.status}`);
    const reader = res.body!.getReader();
    const parser = new SseFrameParser();
    const decoder = new TextDecoder();
    try {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
        for (const f of parser.push(decoder.decode(chunk.value, { stream: true }))) {
          if (!f.id || !f.event || f.data === undefined) continue;
          frames.push({ id: f.id, event: f.event, ...(JSON.parse(f.data) as object) });
        }
      }
    } catch (err) {
      if (!controller.signal.aborted) throw err;
    }
  })();
  const lines = () => frames.flatMap((f) => f.lines ?? []);
  return { frames, lines, done, stop: () => controller.abort() };
}

describe('live agent output (GET /v1/cards/:id/output)', () => {
  let redis: TestRedis;
  let conn: Redis;
  let t: TestStack;
  let admin: ApiClient;

  beforeAll(async () => {
    redis = await startRedis();
    conn = new Redis(redis.url, { maxRetriesPerRequest: null });
    t = await startTestStack(
      redis.url,
      [
        { name: 'ticker', slots: 2, agent: TICKER },
        { name: 'flood', slots: 1, agent: FLOOD },
        { name: 'other', slots: 1, agent: TICKER },
      ],
      { tokens: [ADMIN], scopedTokens: [{ name: 'other-board', sha256: sha256(OTHER), lanes: ['other'], role: 'write' }] },
    );
    admin = apiClient(t.stack.url!, ADMIN);
  });
  afterAll(async () => {
    await t?.stop();
    conn?.disconnect();
    await redis?.stop();
  });

  it('streams lines as they come; a client that reconnects with the last id misses none and repeats none; the tail stays with the card', async () => {
    const id = `tick-${Date.now()}`;
    expect((await admin.request('POST', '/v1/cards', { id, lane: 'ticker', title: 'ticker' })).status).toBe(202);
    const first = openOutput(t.stack.url!, id, {});
    // The first lines arrive while the card still runs: they are streamed, not handed over at the end.
    await waitFor('the first 5 lines', () => first.lines().length >= 5);
    expect((await admin.card(id)).state).toBe('running');
    first.stop();
    await first.done;
    const lastId = first.frames.at(-1)!.id;
    const seen = first.lines();
    expect(seen.length).toBeLessThan(30);
    const second = openOutput(t.stack.url!, id, { 'last-event-id': lastId });
    await second.done; // the stream ends by itself after the card's end
    expect(second.frames.at(-1)).toMatchObject({ event: 'end', state: 'done' });
    expect([...seen, ...second.lines()]).toEqual(TICKER_LINES);
    // Ids go up across the two connections: nothing before the resume point came again.
    const ids = [...first.frames, ...second.frames].map((f) => f.id);
    expect(new Set(ids).size).toBe(ids.length);
    const card = await admin.card(id);
    expect(card.state).toBe('done');
    expect(card.outputTail).toBe(TICKER_LINES.join('\n'));
    // After the end, a new client (or ?after=) gets what is held and the end, then the stream closes.
    const replay = openOutput(t.stack.url!, id, {});
    await replay.done;
    expect(replay.lines()).toEqual(TICKER_LINES);
    const afterEnd = await fetch(`${t.stack.url}/v1/cards/${id}/output?after=${replay.frames.at(-1)!.id}`, { headers: { authorization: `Bearer ${ADMIN}` } });
    expect(afterEnd.status).toBe(200);
    expect(await afterEnd.text()).not.toContain('event: output');
  });

  it('@lanes/client output() yields the lines and returns at the card’s end', async () => {
    const id = `client-${Date.now()}`;
    await admin.request('POST', '/v1/cards', { id, lane: 'ticker', title: 'client' });
    const client = new LanesClient({ url: t.stack.url!, token: ADMIN });
    const lines: string[] = [];
    for await (const chunk of client.output(id)) lines.push(...chunk.lines);
    expect(lines).toEqual(TICKER_LINES);
  });

  it('an agent printing more than the cap: the stream keeps at most the cap, the card keeps the last 64 KiB, the stack stays healthy', async () => {
    const id = `flood-${Date.now()}`;
    await admin.request('POST', '/v1/cards', { id, lane: 'flood', title: 'flood' });
    // Followed by the client, which resumes if the stream drops it as a slow consumer (a batch may be large).
    const client = new LanesClient({ url: t.stack.url!, token: ADMIN });
    const seen: string[] = [];
    const watching = (async () => {
      for await (const chunk of client.output(id, { reconnectDelayMs: 10 })) seen.push(...chunk.lines);
    })();
    await admin.waitCard(id, 'done', (c) => c.state === 'done');
    await watching;
    const entries = (await conn.xrange(keys.cardOutput(id), '-', '+')) as Array<[string, string[]]>;
    const held = entries.reduce((n, [, f]) => n + (f[0] === 'l' ? Buffer.byteLength(f[1] ?? '') : 0), 0);
    expect(held).toBeLessThanOrEqual(agentLimits.CARD_OUTPUT_MAX_BYTES);
    // Oldest lines went first: the first line printed is gone, the last is held.
    const heldLines = entries.flatMap(([, f]) => (f[0] === 'l' ? (f[1] ?? '').split('\n') : []));
    expect(heldLines[0]).not.toBe('0'.repeat(1000));
    expect(heldLines.at(-1)).toBe('flood-end');
    const card = await admin.card(id);
    expect(Buffer.byteLength(card.outputTail ?? '')).toBeLessThanOrEqual(agentLimits.CARD_OUTPUT_TAIL_BYTES);
    expect(Buffer.byteLength(card.outputTail ?? '')).toBeGreaterThan(agentLimits.CARD_OUTPUT_TAIL_BYTES - 1_100);
    expect(card.outputTail?.endsWith('flood-end')).toBe(true);
    // The live client saw lines in order, none twice, the last one included, while the stream trimmed behind it.
    expect(seen.at(-1)).toBe('flood-end');
    const numbers = seen.slice(0, -1).map(Number);
    expect(numbers.every((n, i) => i === 0 || n > numbers[i - 1]!)).toBe(true);
    // A reader from the start after the card ended is told its first lines are gone, then gets all that is held.
    const gaps: EventGap[] = [];
    const late: string[] = [];
    for await (const chunk of client.output(id, { onGap: (gap) => gaps.push(gap) })) late.push(...chunk.lines);
    expect(gaps).toEqual([{ after: '0-0', oldest: entries[0]![0] }]);
    expect(late).toEqual(heldLines);
    const metrics = (await admin.request('GET', '/metrics')).text;
    expect(Number(/^lanes_sse_gaps_total (\d+)$/m.exec(metrics)?.[1])).toBeGreaterThanOrEqual(1);
    expect((await admin.request('GET', '/readyz')).status).toBe(200);
  });

  it('a token whose lanes do not hold the card gets 404, as for GET /v1/cards/:id', async () => {
    const id = `scoped-${Date.now()}`;
    await admin.request('POST', '/v1/cards', { id, lane: 'ticker', title: 'scoped' });
    const other = apiClient(t.stack.url!, OTHER);
    const out = await other.request<{ error: { code: string } }>('GET', `/v1/cards/${id}/output`);
    expect(out.status).toBe(404);
    expect(out.body.error.code).toBe('NOT_FOUND');
    expect((await other.request('GET', `/v1/cards/${id}`)).status).toBe(404);
    expect((await other.request('GET', '/v1/cards/no-such-card/output')).status).toBe(404);
    // The client says so with a permanent error, instead of reconnecting forever.
    const client = new LanesClient({ url: t.stack.url!, token: OTHER });
    await expect(client.output(id).next()).rejects.toBeInstanceOf(LanesApiError);
    // Its own lane's cards it may follow.
    const own = `own-${Date.now()}`;
    await other.request('POST', '/v1/cards', { id: own, lane: 'other', title: 'own' });
    const lines: string[] = [];
    for await (const chunk of client.output(own)) lines.push(...chunk.lines);
    expect(lines).toEqual(TICKER_LINES);
  });

  it('a bad resume id is a 400 naming it', async () => {
    const res = await admin.request<{ error: { code: string } }>('GET', '/v1/cards/x/output?after=nope');
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('QUERY_INVALID');
    const header = await admin.request<{ error: { code: string; issues: Array<{ path: string }> } }>('GET', '/v1/cards/x/output', undefined, { 'last-event-id': 'nope' });
    expect(header.status).toBe(400);
    expect(header.body.error.issues[0]?.path).toBe('last-event-id');
  });
});
