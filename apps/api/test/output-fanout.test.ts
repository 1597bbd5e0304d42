import { once } from 'node:events';
import { Writable } from 'node:stream';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { IllegalStateError } from '@lanes/contracts';
import { CardOutput, appendJobLog, createRedis, keys } from '@lanes/queue';
import { holdingRelay, useRedis, waitFor } from '../../../test/harness/index.js';
import { OutputFanout } from '../src/sse/output-fanout.js';
import type { SseEvent } from '../src/sse/sse-event.js';

/** A sink that records the lines it is fed, and can be closed or made to wait for a drain from the test. */
class RecordingSink {
  isOpen = true;
  needsDrain = false;
  drains = 0;
  began: string | undefined;
  readonly ids: string[] = [];
  readonly lines: string[] = [];
  /** The gaps told in the frames, in order. */
  readonly gaps: unknown[] = [];
  ends: string[] = [];
  begin(afterId: string): void {
    this.began = afterId;
  }
  push(events: readonly SseEvent[]): void {
    for (const e of events) {
      const gap = /^event: gap\ndata: (.*)\n\n/.exec(e.frame);
      if (gap) this.gaps.push(JSON.parse(gap[1]!));
      const frame = gap ? e.frame.slice(gap[0].length) : e.frame;
      this.ids.push(e.id);
      if (e.end) this.ends.push(e.end);
      else this.lines.push(...((JSON.parse(frame.split('\ndata: ')[1] ?? '{}') as { lines?: string[] }).lines ?? []));
    }
  }
  drained(): Promise<void> {
    this.drains++;
    return Promise.resolve();
  }
}

function recordingLog() {
  const lines: Array<{ msg: string }> = [];
  const sink = new Writable({
    write(chunk, _enc, cb) {
      for (const l of String(chunk).split('\n').filter(Boolean)) lines.push(JSON.parse(l) as { msg: string });
      cb();
    },
  });
  return { log: pino({ level: 'info' }, sink), lines };
}

describe('OutputFanout: one reader for every card’s output stream', () => {
  const f = useRedis();
  const fanouts: OutputFanout[] = [];
  const conns: Redis[] = [];
  let n = 0;
  const cardId = () => `out-${process.pid}-${++n}`;
  const print = (id: string, ...lines: string[]) => f.conn.xadd(keys.cardOutput(id), '*', 'l', lines.join('\n'), 't', '0');

  afterEach(async () => {
    for (const x of fanouts.splice(0)) await x.stop();
    for (const c of conns.splice(0)) c.disconnect();
  });

  async function fanout(blockMs = 200, url = f.redis.url) {
    const redis = createRedis(url, { enableOfflineQueue: true, maxRetriesPerRequest: 1 });
    redis.on('error', () => undefined);
    await once(redis, 'ready');
    conns.push(redis);
    const rec = recordingLog();
    const x = new OutputFanout({ redis, log: rec.log, blockMs });
    fanouts.push(x);
    return { x, lines: rec.lines };
  }

  it('catches a sink up from its resume id, then feeds it live; two sinks of one card each get theirs once', async () => {
    const { x } = await fanout();
    const id = cardId();
    await print(id, 'a', 'b');
    const second = await print(id, 'c');
    const all = new RecordingSink();
    const resumed = new RecordingSink();
    all.needsDrain = true; // catch-up waits for the socket between entries
    await x.attach(id, 'lane', all);
    await x.attach(id, 'lane', resumed, second!);
    expect(all.drains).toBe(2);
    expect(resumed.began).toBe(second);
    expect(x.watchedCards).toBe(1);
    await print(id, 'd');
    await waitFor('the live line in both', () => all.lines.length === 4 && resumed.lines.length === 1, { timeoutMs: 5_000 });
    expect(all.lines).toEqual(['a', 'b', 'c', 'd']);
    expect(resumed.lines).toEqual(['d']);
    await f.conn.xadd(keys.cardOutput(id), '*', 'end', 'done', 't', '0');
    await waitFor('the end in both', () => all.ends.length === 1 && resumed.ends.length === 1, { timeoutMs: 5_000 });
    expect(all.ends).toEqual(['done']);
  });

  it('a card that joins while the reader blocks on another is woken into the read, not left for the block to run out', async () => {
    const { x } = await fanout(30_000);
    const first = cardId();
    await x.attach(first, 'lane', new RecordingSink());
    // Let the reader block on the first card alone.
    await waitFor('the reader blocked', async () => /blocked_clients:[1-9]/.test(await f.conn.info('clients')), { timeoutMs: 5_000 });
    const late = cardId();
    const sink = new RecordingSink();
    await x.attach(late, 'lane', sink);
    await print(late, 'woken');
    await waitFor('the late card’s line', () => sink.lines.length === 1, { timeoutMs: 5_000 });
    expect(x.watchedCards).toBe(2);
  });

  it('a sink past the reader’s last id gets only what follows it; a detached or closed sink is forgotten with its card', async () => {
    const { x } = await fanout();
    const id = cardId();
    const ahead = `${Date.now() + 60_000}-0`;
    const sink = new RecordingSink();
    await x.attach(id, 'lane', sink, ahead);
    await print(id, 'before-resume-point');
    await f.conn.xadd(keys.cardOutput(id), `${Date.now() + 60_000}-7`, 'l', 'after', 't', '0');
    await waitFor('the line after the resume point', () => sink.lines.length === 1, { timeoutMs: 5_000 });
    expect(sink.lines).toEqual(['after']);
    const closed = new RecordingSink();
    await x.attach(id, 'lane', closed);
    closed.isOpen = false;
    await f.conn.xadd(keys.cardOutput(id), `${Date.now() + 60_000}-9`, 'l', 'later', 't', '0');
    await waitFor('the next line', () => sink.lines.length === 2, { timeoutMs: 5_000 });
    expect(closed.lines).toEqual(['before-resume-point', 'after']);
    x.detach(id, sink);
    expect(x.watchedCards).toBe(0);
    x.detach(id, sink); // twice is nothing
    // A sink that closes during its catch-up is not added.
    const quitter = new RecordingSink();
    quitter.needsDrain = true;
    quitter.drained = () => {
      quitter.isOpen = false;
      return Promise.resolve();
    };
    await x.attach(id, 'lane', quitter);
    expect(quitter.lines).toEqual(['before-resume-point']);
    expect(x.watchedCards).toBe(0);
  });

  it('logs a failed read once, and resumes after the last entry it delivered', async () => {
    const { x, lines } = await fanout(100);
    const id = cardId();
    const sink = new RecordingSink();
    await x.attach(id, 'lane', sink);
    await print(id, 'before-failure');
    await waitFor('the first line', () => sink.lines.length === 1, { timeoutMs: 5_000 });
    const saved = `${keys.cardOutput(id)}-saved`;
    await f.conn.rename(keys.cardOutput(id), saved);
    await f.conn.set(keys.cardOutput(id), 'not a stream');
    await waitFor('the failed read logged', () => lines.some((l) => l.msg === 'sse.output_fanout.read_failed'), { timeoutMs: 10_000 });
    await f.conn.del(keys.cardOutput(id));
    await f.conn.rename(saved, keys.cardOutput(id));
    await print(id, 'after-failure');
    await waitFor('the line after the failure', () => sink.lines.length === 2, { timeoutMs: 10_000 });
    expect(sink.lines).toEqual(['before-failure', 'after-failure']);
    expect(lines.some((l) => l.msg === 'sse.output_fanout.recovered')).toBe(true);
  });

  it('is idle until its first stream, and refuses to attach once stopped', async () => {
    const { x } = await fanout();
    expect(x.status).toBe('idle');
    await x.attach(cardId(), 'lane', new RecordingSink());
    expect(x.status).toBe('running');
    await x.stop();
    await x.stop();
    expect(x.status).toBe('stopped');
    await expect(x.attach(cardId(), 'lane', new RecordingSink())).rejects.toBeInstanceOf(IllegalStateError);
    // Stopped while idle (no card watched, the reader waiting for one): it returns.
    const { x: idle } = await fanout();
    const id = cardId();
    const s = new RecordingSink();
    await idle.attach(id, 'lane', s);
    idle.detach(id, s);
    await idle.stop();
    expect(idle.status).toBe('stopped');
  });
  /** A card whose output is held to `budget` bytes, printed through the job log's own append script: answers each call's entry id. */
  async function printer(budget: number) {
    const id = cardId();
    await f.conn.hset(keys.job('lane', id), 'name', 'card');
    return {
      id,
      print: async (line: string) => {
        await appendJobLog(f.conn, 'lane', id, [line], undefined, budget);
        return new CardOutput(f.conn).tailId(id);
      },
    };
  }

  it('a sink whose resume point the budget trimmed past is told of the gap in the frame of the first line it gets; from a held point, none', async () => {
    const { x } = await fanout();
    const card = await printer(20);
    const ids: string[] = [];
    for (let i = 0; i < 8; i++) ids.push(await card.print(`line-${i}`)); // 6 bytes each: the stream holds the last 3
    const held = (await f.conn.xrange(keys.cardOutput(card.id), '-', '+')).map(([entryId]) => entryId);
    expect(held).toEqual(ids.slice(5));

    const behind = new RecordingSink();
    await x.attach(card.id, 'lane', behind, ids[1]);
    expect(behind.gaps).toEqual([{ after: ids[1], oldest: ids[5] }]);
    expect(behind.lines).toEqual(['line-5', 'line-6', 'line-7']);
    // From the start: the lines before the oldest held are gone, and it is told so.
    const fromStart = new RecordingSink();
    await x.attach(card.id, 'lane', fromStart);
    expect(fromStart.gaps).toEqual([{ after: '0-0', oldest: ids[5] }]);
    expect(x.gapsTold).toBe(2);
    // From an entry still held: its bytes meet the next entry's, so nothing is told.
    const caughtUp = new RecordingSink();
    await x.attach(card.id, 'lane', caughtUp, ids[5]);
    expect([caughtUp.gaps, caughtUp.lines]).toEqual([[], ['line-6', 'line-7']]);
    // Live lines that follow what it has meet it too.
    await card.print('line-8');
    await waitFor('line-8 live', () => caughtUp.lines.includes('line-8'), { timeoutMs: 5_000 });
    expect(caughtUp.gaps).toEqual([]);
    expect(x.gapsTold).toBe(2);
  });

  it('a card that never trimmed tells no gap, from the start or live', async () => {
    const { x } = await fanout();
    const card = await printer(1_000);
    await card.print('one');
    const sink = new RecordingSink();
    await x.attach(card.id, 'lane', sink);
    await card.print('two');
    await waitFor('two live', () => sink.lines.includes('two'), { timeoutMs: 5_000 });
    expect([sink.gaps, sink.lines]).toEqual([[], ['one', 'two']]);
  });

  it('a live reader a flood passed between two reads tells the gap before the first line it still gets', async () => {
    const { x } = await fanout();
    const card = await printer(20);
    const first = await card.print('line-0');
    const sink = new RecordingSink();
    await x.attach(card.id, 'lane', sink, first);
    // Three entries added and the oldest two trimmed in one step, as the append script does for a
    // card that printed past its budget: the reader wakes to the last only.
    const key = keys.cardOutput(card.id);
    const ms = Number(first.split('-')[0]) + 1;
    const ids = [1, 2, 3].map((i) => `${ms}-${i}`);
    const flood = f.conn.multi();
    for (const [i, through] of [
      [1, 12],
      [2, 18],
      [3, 24],
    ] as const)
      flood.xadd(key, ids[i - 1]!, 'l', `line-${i}`, 't', String(through));
    flood.xtrim(key, 'MINID', ids[2]!);
    await flood.exec();
    await waitFor('line-3 live', () => sink.lines.includes('line-3'), { timeoutMs: 5_000 });
    expect(sink.lines).toEqual(['line-3']);
    expect(sink.gaps).toEqual([{ after: first, oldest: ids[2] }]);
  });

  it('a resume whose catch-up finds everything up to the reader’s point trimmed is told of the gap, though the reader itself lost nothing', async () => {
    const relay = await holdingRelay(f.redis.url);
    try {
      const { x } = await fanout(200, relay.url);
      const card = await printer(20);
      const ids: string[] = [];
      for (let i = 0; i < 3; i++) ids.push(await card.print(`line-${i}`));
      const live = new RecordingSink();
      await x.attach(card.id, 'lane', live, ids[2]); // the reader starts at the tail: ids[2]
      await waitFor('the reader connected', () => relay.connections() === 2, { timeoutMs: 5_000 });
      relay.hold(1);
      // One more line, and the trim up to it: the reader, held at ids[2], will find it meets what it read.
      const key = keys.cardOutput(card.id);
      const next = `${Number(ids[2]!.split('-')[0]) + 1}-0`;
      const fields = (await f.conn.xrange(key, ids[2]!, ids[2]!))[0]![1];
      const through = Number(fields[fields.indexOf('t') + 1]) + 'line-3'.length;
      await f.conn.multi().xadd(key, next, 'l', 'line-3', 't', String(through)).xtrim(key, 'MINID', next).exec();
      const late = new RecordingSink();
      await x.attach(card.id, 'lane', late, ids[0]);
      relay.release(1);
      await waitFor('line-3 in both', () => live.lines.includes('line-3') && late.lines.includes('line-3'), { timeoutMs: 5_000 });
      expect(live.gaps).toEqual([]);
      expect(late.gaps).toEqual([{ after: ids[0], oldest: next }]);
      expect(late.lines).toEqual(['line-3']);
    } finally {
      relay.close();
    }
  });
});
