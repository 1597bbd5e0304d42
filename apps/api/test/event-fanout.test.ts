import { once } from 'node:events';
import type { Redis } from 'ioredis';
import pino from 'pino';
import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { IllegalStateError, type EventGap, type LaneEvent } from '@lanes/contracts';
import { createRedis, EventLog, keys } from '@lanes/queue';
import { holdingRelay, useRedis, waitFor } from '../../../test/harness/index.js';
import { EventFanout } from '../src/sse/event-fanout.js';
import type { SseEvent } from '../src/sse/sse-event.js';

/** A sink that records what it is fed, and can be closed from the test. */
class RecordingSink {
  isOpen = true;
  needsDrain = false;
  began: string | undefined;
  readonly gaps: EventGap[] = [];
  readonly ids: string[] = [];
  readonly cards: string[] = [];
  begin(afterId: string): void {
    this.began = afterId;
  }
  gap(gap: EventGap): void {
    this.gaps.push(gap);
  }
  push(events: readonly SseEvent[]): void {
    for (const e of events) {
      this.ids.push(e.id);
      this.cards.push((JSON.parse(e.frame.split('\ndata: ')[1] ?? '{}') as { cardId?: string }).cardId ?? '');
    }
  }
  drained(): Promise<void> {
    return Promise.resolve();
  }
  ended: string | undefined;
  end(reason: 'redis-unavailable'): void {
    this.ended = reason;
    this.isOpen = false;
  }
}

/** A pino logger whose lines land in `lines`, parsed. */
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

const laneEvent = (lane: string, cardId: string): LaneEvent => ({ type: 'card.queued', at: new Date().toISOString(), lane, cardId });
const event = (cardId: string): LaneEvent => laneEvent('fan', cardId);

describe('EventFanout: the one reader per API process', () => {
  const f = useRedis();
  const fanouts: EventFanout[] = [];
  const conns: Redis[] = [];

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
    const x = new EventFanout({ redis, log: rec.log, blockMs });
    fanouts.push(x);
    return { x, lines: rec.lines };
  }

  it('is idle until its first stream, running after, and refuses to start again once stopped', async () => {
    const { x } = await fanout();
    expect(x.status).toBe('idle');
    const sink = new RecordingSink();
    await x.attach(sink);
    expect(x.status).toBe('running');
    expect(x.liveSinks).toBe(1);
    await x.stop();
    expect(x.status).toBe('stopped');
    expect(x.liveSinks).toBe(0);
    await expect(x.attach(new RecordingSink())).rejects.toBeInstanceOf(IllegalStateError);
  });

  it('a sink that resumes from an id the reader has not reached gets only what follows that id', async () => {
    const { x } = await fanout();
    await x.attach(new RecordingSink()); // pins the reader at the stream's tail
    const ahead = `${Date.now() + 60_000}-0`;
    const sink = new RecordingSink();
    await x.attach(sink, ahead);
    expect(sink.began).toBe(ahead);
    expect(x.liveSinks).toBe(2);
    const log = new EventLog(f.conn);
    await log.append(event('before-resume-point'));
    const after = `${Date.now() + 60_000}-7`;
    await f.conn.xadd(keys.events(), after, 'e', JSON.stringify(event('after-resume-point')));
    await waitFor('sink.ids.length > 0', () => sink.ids.length > 0, { timeoutMs: 5_000 });
    await log.append(event('later'));
    await waitFor('sink.ids.length > 1', () => sink.ids.length > 1, { timeoutMs: 5_000 });
    expect(sink.cards).toEqual(['after-resume-point', 'later']);
    expect(sink.ids[0]).toBe(after);
  });

  /** Starts the stream afresh (its trim count too) with `n` events named `<prefix>-<i>`, and answers their stream ids, in order. */
  async function appendMany(prefix: string, n: number): Promise<string[]> {
    await f.conn.del(keys.events());
    const pipeline = f.conn.pipeline();
    for (let i = 0; i < n; i++) pipeline.xadd(keys.events(), '*', 'e', JSON.stringify(event(`${prefix}-${i}`)));
    return ((await pipeline.exec()) ?? []).map(([, id]) => id as string);
  }

  it('a resume from an id the stream has trimmed past is told of the gap first, then replays from the oldest event held', async () => {
    const { x, lines } = await fanout();
    const ids = await appendMany('old', 300);
    // As XADD's MAXLEN does once the stream holds EVENT_STREAM_MAX_LEN (exactly here, so the oldest held is known).
    await f.conn.xtrim(keys.events(), 'MAXLEN', 100);
    const sink = new RecordingSink();
    await x.attach(sink, ids[10]);
    expect(sink.gaps).toEqual([{ after: ids[10], oldest: ids[200] }]);
    expect(sink.ids).toEqual(ids.slice(200));
    expect(lines.filter((l) => l.msg === 'sse.gap')).toHaveLength(1);

    // From an id the stream still holds: no gap.
    const held = new RecordingSink();
    await x.attach(held, ids[250]);
    expect([held.gaps, held.ids]).toEqual([[], ids.slice(251)]);
    // The last id trimmed reads as a gap too: what was trimmed after it is not recorded (resume-gap.ts).
    const edge = new RecordingSink();
    await x.attach(edge, ids[199]);
    expect(edge.gaps).toEqual([{ after: ids[199], oldest: ids[200] }]);
    expect(x.gapsTold).toBe(2);
  });

  it('a stream that never trimmed tells no gap, even from 0-0', async () => {
    const { x } = await fanout();
    const ids = await appendMany('kept', 5);
    const sink = new RecordingSink();
    await x.attach(sink, '0-0');
    expect([sink.gaps, sink.ids]).toEqual([[], ids]);
    expect(x.gapsTold).toBe(0);
  });

  it('a replay the trim overtakes between two pages is told of the gap where it happened', async () => {
    const { x } = await fanout();
    const ids = await appendMany('slow', 400);
    const sink = new RecordingSink();
    // The client reads slowly: while it drains the first page, the stream trims to its newest 100.
    sink.needsDrain = true;
    let trimmed = false;
    sink.drained = async () => {
      if (!trimmed) await f.conn.xtrim(keys.events(), 'MAXLEN', 100);
      trimmed = true;
      sink.needsDrain = false;
    };
    await x.attach(sink, '0-0');
    // The first page was read whole (ids 0–99), then the replay went on from the oldest held.
    expect(sink.gaps).toEqual([{ after: ids[99], oldest: ids[300] }]);
    expect(sink.ids).toEqual([...ids.slice(0, 100), ...ids.slice(300)]);
  });

  it('a live reader the trim overtook tells its live sinks of the gap, then delivers from the oldest event held', async () => {
    const { x } = await fanout();
    const [tail] = await appendMany('before', 1);
    const sink = new RecordingSink();
    await x.attach(sink);
    // A burst that passes the window before the reader's next read: added and trimmed in one transaction.
    const burst = f.conn.multi();
    for (let i = 0; i < 300; i++) burst.xadd(keys.events(), '*', 'e', JSON.stringify(event(`burst-${i}`)));
    burst.xtrim(keys.events(), 'MAXLEN', 100);
    const ids = ((await burst.exec()) ?? []).slice(0, 300).map(([, id]) => id as string);
    await waitFor('the held 100 delivered', () => sink.ids.length === 100, { timeoutMs: 5_000 });
    expect(sink.gaps).toEqual([{ after: tail, oldest: ids[200] }]);
    expect(sink.ids).toEqual(ids.slice(200));
  });

  it('a replay that catches up to where the overtaken live reader stands is told of the hole once, not again by the live reader', async () => {
    const relay = await holdingRelay(f.redis.url);
    try {
      const first = await appendMany('read', 101);
      const { x } = await fanout(200, relay.url);
      const live = new RecordingSink();
      await x.attach(live); // the reader starts at the tail: first[100]
      await waitFor('the reader connected', () => relay.connections() === 2, { timeoutMs: 5_000 });
      // The reader reads no further until released, while a burst passes the window.
      relay.hold(1);
      const burst = f.conn.multi();
      for (let i = 0; i < 199; i++) burst.xadd(keys.events(), '*', 'e', JSON.stringify(event(`burst-${i}`)));
      burst.xtrim(keys.events(), 'MAXLEN', 100);
      const ids = [...first, ...((await burst.exec()) ?? []).slice(0, 199).map(([, id]) => id as string)];
      // Its catch-up ends at the reader's point, first[100], which the trim passed as well.
      const late = new RecordingSink();
      await x.attach(late, ids[0]);
      expect(late.gaps).toEqual([{ after: ids[0], oldest: ids[200] }]);
      relay.release(1);
      await waitFor('the held 100 delivered', () => late.ids.length === 100 && live.ids.length === 100, { timeoutMs: 5_000 });
      expect(late.gaps).toEqual([{ after: ids[0], oldest: ids[200] }]);
      expect(live.gaps).toEqual([{ after: ids[100], oldest: ids[200] }]);
      expect(late.ids).toEqual(ids.slice(200));
      expect(x.gapsTold).toBe(2);
    } finally {
      relay.close();
    }
  });

  it('a replay scoped to lanes that another lane’s burst trimmed past goes on from their own streams, told only of what they lost', async () => {
    const { x } = await fanout();
    await f.conn.del(keys.events(), keys.laneEventsSince(), keys.laneEvents('quiet'), keys.laneEvents('busy'), keys.laneEvents('loud'));
    const log = new EventLog(f.conn);
    const burst = async (lane: string, n: number) => {
      const multi = f.conn.multi();
      for (let i = 0; i < n; i++) log.appendTo(multi, laneEvent(lane, `${lane}-${i}`));
      await multi.exec();
    };
    await log.append(laneEvent('quiet', 'quiet-0'));
    await burst('busy', 20);
    const resumeAt = await new EventLog(f.conn).tailId();
    await log.append(laneEvent('quiet', 'quiet-1'));
    await burst('busy', 20);
    await burst('loud', 300);
    await log.append(laneEvent('quiet', 'quiet-2'));
    // The shared stream keeps its newest 100 (as MAXLEN does past EVENT_STREAM_MAX_LEN): loud's burst passed quiet-1 and busy's.
    await f.conn.xtrim(keys.events(), 'MAXLEN', 100);
    const quiet = new RecordingSink();
    await x.attach(quiet, resumeAt, new Set(['quiet']));
    expect(quiet.gaps).toEqual([]);
    expect(quiet.cards.filter((c) => c.startsWith('quiet'))).toEqual(['quiet-1', 'quiet-2']);
    // A lane whose own stream trimmed past the resume point is told of its own gap.
    await f.conn.xtrim(keys.laneEvents('busy'), 'MAXLEN', 5);
    const busyHeld = ((await f.conn.xrange(keys.laneEvents('busy'), '-', '+')) as Array<[string, string[]]>).map(([id]) => id);
    const busy = new RecordingSink();
    await x.attach(busy, resumeAt, new Set(['busy', 'quiet']));
    expect(busy.gaps).toEqual([{ after: resumeAt, oldest: busyHeld[0] }]);
    expect(busy.cards.filter((c) => c.startsWith('busy'))).toEqual(['busy-15', 'busy-16', 'busy-17', 'busy-18', 'busy-19']);
    // Unscoped, or from before the lane streams began, the shared stream's gap stands.
    const everyLane = new RecordingSink();
    await x.attach(everyLane, resumeAt);
    const oldest = ((await f.conn.xrange(keys.events(), '-', '+', 'COUNT', 1)) as Array<[string, string[]]>)[0]![0];
    expect(everyLane.gaps).toEqual([{ after: resumeAt, oldest }]);
    await f.conn.set(keys.laneEventsSince(), oldest);
    const beforeMark = new RecordingSink();
    await x.attach(beforeMark, resumeAt, new Set(['quiet']));
    expect(beforeMark.gaps).toEqual([{ after: resumeAt, oldest }]);
  });

  it('a live reader another lane’s burst overtook replays a scoped stream from its lanes’ own streams: no gap, nothing lost; an unscoped one is told', async () => {
    const relay = await holdingRelay(f.redis.url);
    try {
      await f.conn.del(keys.events(), keys.laneEventsSince(), keys.laneEvents('quiet'), keys.laneEvents('loud'));
      const log = new EventLog(f.conn);
      await log.append(laneEvent('quiet', 'quiet-0'));
      const { x } = await fanout(200, relay.url);
      const quiet = new RecordingSink();
      const everyLane = new RecordingSink();
      await x.attach(quiet, undefined, new Set(['quiet']));
      await x.attach(everyLane);
      await waitFor('the reader connected', () => relay.connections() === 2, { timeoutMs: 5_000 });
      relay.hold(1);
      // While the reader reads nothing: a quiet event, a loud burst past the shared window, another quiet one.
      const burst = f.conn.multi();
      log.appendTo(burst, laneEvent('quiet', 'quiet-1'));
      for (let i = 0; i < 300; i++) log.appendTo(burst, laneEvent('loud', `loud-${i}`));
      log.appendTo(burst, laneEvent('quiet', 'quiet-2'));
      burst.xtrim(keys.events(), 'MAXLEN', 100);
      await burst.exec();
      relay.release(1);
      await waitFor('both quiet events', () => quiet.cards.includes('quiet-2'), { timeoutMs: 5_000 });
      expect(quiet.gaps).toEqual([]);
      expect(quiet.cards).toEqual(['quiet-1', 'quiet-2']);
      await waitFor('the unscoped stream’s last event', () => everyLane.cards.includes('quiet-2'), { timeoutMs: 5_000 });
      expect(everyLane.gaps).toHaveLength(1);
      expect(everyLane.cards).not.toContain('quiet-1');
      // Rejoined: the next event reaches it live.
      await log.append(laneEvent('quiet', 'quiet-3'));
      await waitFor('quiet-3 live', () => quiet.cards.includes('quiet-3'), { timeoutMs: 5_000 });
      expect(quiet.cards).toEqual(['quiet-1', 'quiet-2', 'quiet-3']);
      expect(x.liveSinks).toBe(2);
    } finally {
      relay.close();
    }
  });

  it('a scoped stream whose replay after an overtaken reader Redis cannot serve is ended with its resume id, not left without events', async () => {
    const relay = await holdingRelay(f.redis.url);
    try {
      await f.conn.del(keys.events(), keys.laneEventsSince(), keys.laneEvents('quiet'));
      const log = new EventLog(f.conn);
      await log.append(laneEvent('quiet', 'quiet-0'));
      const { x, lines } = await fanout(200, relay.url);
      const quiet = new RecordingSink();
      await x.attach(quiet, undefined, new Set(['quiet']));
      await waitFor('the reader connected', () => relay.connections() === 2, { timeoutMs: 5_000 });
      relay.hold(1);
      const burst = f.conn.multi();
      for (let i = 0; i < 300; i++) log.appendTo(burst, laneEvent('loud', `loud-${i}`));
      burst.xtrim(keys.events(), 'MAXLEN', 100);
      await burst.exec();
      // The lane's own stream unreadable (a key of another type): its replay fails.
      await f.conn.set(keys.laneEvents('quiet'), 'not a stream');
      relay.release(1);
      await waitFor('the stream ended', () => quiet.ended !== undefined, { timeoutMs: 5_000 });
      expect(quiet.ended).toBe('redis-unavailable');
      expect(lines.some((l) => l.msg === 'sse.replay_failed')).toBe(true);
      expect(x.liveSinks).toBe(0);
    } finally {
      await f.conn.del(keys.laneEvents('quiet'));
      relay.close();
    }
  });

  it('forgets a sink that closed, at the next delivery', async () => {
    const { x } = await fanout();
    const gone = new RecordingSink();
    const kept = new RecordingSink();
    await x.attach(gone);
    await x.attach(kept);
    expect(x.liveSinks).toBe(2);
    gone.isOpen = false;
    await new EventLog(f.conn).append(event('one'));
    await waitFor('kept.ids.length === 1', () => kept.ids.length === 1, { timeoutMs: 5_000 });
    expect(gone.ids).toEqual([]);
    expect(x.liveSinks).toBe(1);
  });

  it('logs a failed read once, keeps its streams while reads fail, and resumes after the last event it delivered', async () => {
    const { x, lines } = await fanout(100);
    const sink = new RecordingSink();
    await x.attach(sink);
    await new EventLog(f.conn).append(event('before-failure'));
    await waitFor('the first event', () => sink.ids.length === 1, { timeoutMs: 5_000 });
    // The stream's key turned into a string: every XREAD on it answers WRONGTYPE until it is a stream again.
    const saved = `${keys.events()}-saved`;
    await f.conn.rename(keys.events(), saved);
    await f.conn.set(keys.events(), 'not a stream');
    await waitFor('the failed read logged', () => lines.some((l) => l.msg === 'sse.fanout.read_failed'), { timeoutMs: 10_000 });
    // Several reads fail (one each FANOUT_RETRY_DELAY_MS) before the key is mended; the warning is logged once.
    const wrongType = async () => Number(/errorstat_WRONGTYPE:count=(\d+)/.exec(await f.conn.info('errorstats'))?.[1] ?? 0);
    await waitFor('three failed reads', async () => (await wrongType()) >= 3, { timeoutMs: 10_000 });
    await f.conn.del(keys.events());
    await f.conn.rename(saved, keys.events());
    await new EventLog(f.conn).append(event('after-failure'));
    await waitFor('the event after the failure', () => sink.ids.length === 2, { timeoutMs: 10_000 });
    expect(sink.cards).toEqual(['before-failure', 'after-failure']);
    expect(lines.filter((l) => l.msg === 'sse.fanout.read_failed')).toHaveLength(1);
    expect(lines.some((l) => l.msg === 'sse.fanout.recovered')).toBe(true);
    expect(x.liveSinks).toBe(1);
  });
});
