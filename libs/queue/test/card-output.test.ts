import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentLimits, defaults, type Card } from '@lanes/contracts';
import { CardOutput, CardStore, appendJobLog, createRedis, keys, trimOutputTail, type CardWriter, type OutputEntry } from '@lanes/queue';
import { startRedis, type TestRedis } from '../../../test/harness/index.js';

const uid = (label: string) => `${label}-${randomBytes(4).toString('hex')}`;

describe('trimOutputTail', () => {
  it.each<[string, string, number, string]>([
    ['fits: unchanged', 'a\nb\nc', 5, 'a\nb\nc'],
    ['empty', '', 0, ''],
    ['cut exactly at a line start', 'aa\nbb\ncc', 5, 'bb\ncc'],
    ['cut inside a line: that line goes whole', 'aa\nbb\ncc', 4, 'cc'],
    ['one byte over', 'aa\nbb', 4, 'bb'],
    ['one line longer than the cap: its last bytes', 'abcdefgh', 3, 'fgh'],
    ['never half a character: a cut inside é skips it', 'xéé', 3, 'é'],
    ['a newline as the last byte is no line start to cut at', 'abc\n', 2, 'c\n'],
  ])('%s', (_name, text, maxBytes, expected) => {
    const out = trimOutputTail(text, maxBytes);
    expect(out).toBe(expected);
    expect(Buffer.byteLength(out)).toBeLessThanOrEqual(maxBytes);
  });

  it('the named caps: 64 KiB kept with the card, 1 MiB while it runs', () => {
    expect(agentLimits.CARD_OUTPUT_TAIL_BYTES).toBe(64 * 1024);
    expect(agentLimits.CARD_OUTPUT_MAX_BYTES).toBe(1024 * 1024);
  });
});

/** The output stream as the job log's append and the move script write it, on a real redis-server. */
describe('a card’s output stream', () => {
  let server: TestRedis;
  let redis: Redis;
  let output: CardOutput;
  const lane = uid('lane');
  let store: CardStore;

  beforeAll(async () => {
    server = await startRedis();
    redis = createRedis(server.url);
    output = new CardOutput(redis);
    store = new CardStore({ redis, now: Date.now, lanes: [{ name: lane, retention: { terminalCardDays: 1 } }] });
  });
  afterAll(async () => {
    redis?.disconnect();
    await server?.stop();
  });

  const newCard = (): Card => ({ id: uid('card'), lane, title: 't', priority: 0 });
  const takeJob = async (card: Card): Promise<CardWriter> => {
    const token = uid('tok');
    await redis.set(keys.jobLock(card.lane, card.id), token);
    await redis.hset(keys.job(card.lane, card.id), 'name', card.lane, 'data', JSON.stringify(card));
    return { kind: 'run', token };
  };
  const linesOf = (entries: OutputEntry[]) => entries.flatMap((e) => (e.kind === 'lines' ? e.lines : []));
  const heldBytes = async (card: Card) => {
    const entries = (await redis.xrange(keys.cardOutput(card.id), '-', '+')) as Array<[string, string[]]>;
    return entries.reduce((n, [, f]) => n + (f[0] === 'l' ? Buffer.byteLength(f[1] ?? '') : 0), 0);
  };

  it('a small batch is one entry; reading after an entry’s id gives the later ones, none twice', async () => {
    const card = newCard();
    await store.create(card);
    await takeJob(card);
    await appendJobLog(redis, lane, card.id, ['one', 'two']);
    await appendJobLog(redis, lane, card.id, ['', 'four']);
    await appendJobLog(redis, lane, card.id, ['five']);
    const all = await output.range(card.id, '0-0', 100);
    expect(linesOf(all.entries)).toEqual(['one', 'two', '', 'four', 'five']);
    const first = all.entries[0]!.id;
    expect(linesOf((await output.range(card.id, first, 100)).entries)).toEqual(['', 'four', 'five']);
    expect(await output.tailId(card.id)).toBe(all.lastId);
    expect(await output.tail(card.id)).toBe('one\ntwo\n\nfour\nfive');
    expect(await output.tail(card.id, 9)).toBe('four\nfive');
  });

  it('holds at most the byte budget, oldest entries trimmed first, the newest lines kept', async () => {
    const card = newCard();
    await store.create(card);
    await takeJob(card);
    const budget = 1_000;
    for (let i = 0; i < 50; i++) await appendJobLog(redis, lane, card.id, [`${i}`.padStart(3, '0') + 'x'.repeat(96)], undefined, budget);
    expect(await heldBytes(card)).toBeLessThanOrEqual(budget);
    expect(await heldBytes(card)).toBeGreaterThan(budget - 100);
    const lines = linesOf((await output.range(card.id, '0-0', 100)).entries);
    expect(lines.at(-1)?.startsWith('049')).toBe(true);
    expect(lines.length).toBe(10);
    // One batch larger than the budget keeps its last lines that fit.
    await appendJobLog(
      redis,
      lane,
      card.id,
      Array.from({ length: 30 }, (_, i) => `big-${i}`.padEnd(99, '.')),
      undefined,
      budget,
    );
    expect(await heldBytes(card)).toBeLessThanOrEqual(budget);
    const after = linesOf((await output.range(card.id, '0-0', 100)).entries);
    expect(after.at(-1)?.startsWith('big-29')).toBe(true);
    expect(after.some((l) => l.startsWith('049'))).toBe(false);
  });

  it('a large batch followed by a small one still holds the last 64 KiB: entries are cut at 64 KiB, so trimming whole ones oldest first keeps all but one entry’s worth of the budget', async () => {
    const card = newCard();
    await store.create(card);
    await takeJob(card);
    // Just under the budget in one batch (an agent flooding faster than the worker appends), then
    // enough to push the first byte out: trimmed as one entry, the whole megabyte would go.
    const line = (i: number) => `${i}`.padStart(999, '0');
    await appendJobLog(
      redis,
      lane,
      card.id,
      Array.from({ length: 1_040 }, (_, i) => line(i)),
    );
    await appendJobLog(
      redis,
      lane,
      card.id,
      Array.from({ length: 60 }, (_, i) => line(1_040 + i)),
    );
    await appendJobLog(redis, lane, card.id, ['the-end']);
    const held = await heldBytes(card);
    expect(held).toBeLessThanOrEqual(agentLimits.CARD_OUTPUT_MAX_BYTES);
    expect(held).toBeGreaterThan(agentLimits.CARD_OUTPUT_MAX_BYTES - agentLimits.CARD_OUTPUT_ENTRY_MAX_BYTES - 1_000);
    const tail = (await output.tail(card.id))!;
    expect(Buffer.byteLength(tail)).toBeGreaterThan(agentLimits.CARD_OUTPUT_TAIL_BYTES - 1_000);
    expect(tail.endsWith(`${line(1_099)}\nthe-end`)).toBe(true);
    // Entries stay whole lines, in order, each within its cap.
    const entries = (await output.range(card.id, '0-0', 1_000)).entries;
    const lines = linesOf(entries);
    expect(lines.at(-1)).toBe('the-end');
    expect(lines.slice(0, -1).every((l, i, all) => i === 0 || Number(l) === Number(all[i - 1]) + 1)).toBe(true);
    for (const e of entries) if (e.kind === 'lines') expect(Buffer.byteLength(e.lines.join('\n'))).toBeLessThanOrEqual(agentLimits.CARD_OUTPUT_ENTRY_MAX_BYTES);
  });

  it('a terminal move adds the end entry and gives the stream the card’s expiry; a retry persists it', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await takeJob(card);
    expect((await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer)).ok).toBe(true);
    await appendJobLog(redis, lane, card.id, ['working']);
    expect(await redis.pttl(keys.cardOutput(card.id))).toBe(-1);
    expect((await store.transition(card, { to: 'failed', attempt: 1, sandboxId: 'sb', failedReason: 'command-failed' }, writer)).ok).toBe(true);
    const entries = (await output.range(card.id, '0-0', 100)).entries;
    expect(entries.at(-1)).toMatchObject({ kind: 'end', state: 'failed' });
    const ttl = await redis.pttl(keys.cardOutput(card.id));
    expect(ttl).toBeGreaterThan(defaults.MS_PER_DAY - 60_000);
    expect(ttl).toBeLessThanOrEqual(defaults.MS_PER_DAY);
    expect(await output.tail(card.id)).toBe('working');
    // The end entry carries the bytes written so far, so the next run's budget counts from there.
    const raw = (await redis.xrevrange(keys.cardOutput(card.id), '+', '-', 'COUNT', 1)) as Array<[string, string[]]>;
    expect(raw[0]?.[1]).toEqual(['end', 'failed', 't', '7']);
    await redis.del(keys.jobLock(card.lane, card.id));
    await redis.zadd(`lanes:${lane}:failed`, 1, card.id);
    expect((await store.retry(card, { message: 'again', job: { kind: 'clear' } })).ok).toBe(true);
    expect(await redis.pttl(keys.cardOutput(card.id))).toBe(-1);
  });

  it('a card that ended without printing keeps its end entry for the grace only, not its retention', async () => {
    const card = newCard();
    await store.create(card);
    const writer = await takeJob(card);
    expect((await store.transition(card, { to: 'running', attempt: 1, sandboxId: 'sb' }, writer)).ok).toBe(true);
    expect((await store.transition(card, { to: 'done', attempt: 1, sandboxId: 'sb' }, writer)).ok).toBe(true);
    expect((await output.range(card.id, '0-0', 100)).entries).toEqual([expect.objectContaining({ kind: 'end', state: 'done' })]);
    const ttl = await redis.pttl(keys.cardOutput(card.id));
    expect(ttl).toBeGreaterThan(0);
    expect(ttl).toBeLessThanOrEqual(agentLimits.CARD_OUTPUT_END_GRACE_MS);
    // The record keeps the card's retention.
    expect(await redis.pttl(keys.card(card.id))).toBeGreaterThan(defaults.MS_PER_DAY - 60_000);
  });

  it('a card that never printed has no tail; a blocking read of many cards answers per card', async () => {
    const quiet = newCard();
    expect(await output.tail(quiet.id)).toBeUndefined();
    const a = newCard();
    await store.create(a);
    await takeJob(a);
    await appendJobLog(redis, lane, a.id, ['from-a']);
    const pages = await output.readMany(
      new Map([
        [a.id, '0-0'],
        [quiet.id, '0-0'],
      ]),
      10,
      10,
    );
    expect([...pages.keys()]).toEqual([a.id]);
    expect(linesOf(pages.get(a.id)!.entries)).toEqual(['from-a']);
  });
});
