import { describe, expect, it } from 'vitest';
import { PublishThrottle, decideThrottle, type ThrottleAction, type ThrottleSnapshot } from '../src/publish-throttle.js';
import { waitFor } from '../../../test/harness/index.js';

const INTERVAL_MS = 100;
const NOW = 1_000_000;

describe('decideThrottle', () => {
  it.each<[string, ThrottleSnapshot, ThrottleAction]>([
    ['never sent', { scheduled: false, nowMs: NOW }, { action: 'now' }],
    ['sent just now', { lastAtMs: NOW, scheduled: false, nowMs: NOW }, { action: 'later', waitMs: 100 }],
    ['sent 30 ms ago', { lastAtMs: NOW - 30, scheduled: false, nowMs: NOW }, { action: 'later', waitMs: 70 }],
    ['sent exactly one interval ago', { lastAtMs: NOW - 100, scheduled: false, nowMs: NOW }, { action: 'now' }],
    ['sent long ago', { lastAtMs: NOW - 60_000, scheduled: false, nowMs: NOW }, { action: 'now' }],
    ['a later run is scheduled: it carries this change', { lastAtMs: NOW - 30, scheduled: true, nowMs: NOW }, { action: 'none' }],
    ['a clock that went back waits at most an interval past the last', { lastAtMs: NOW + 50, scheduled: false, nowMs: NOW }, { action: 'later', waitMs: 150 }],
  ])('%s', (_name, snapshot, action) => {
    expect(decideThrottle(snapshot, INTERVAL_MS)).toEqual(action);
  });
});

describe('PublishThrottle on real timers', () => {
  it('a burst of changes goes out twice (at once, then the latest at the interval end); a quiet key goes at once again', async () => {
    const sent: Array<{ key: string; state: number }> = [];
    let state = 0;
    const throttle = new PublishThrottle<string>({ intervalMs: 50, now: Date.now, run: (key) => sent.push({ key, state }) });
    for (state = 1; state <= 10; state++) throttle.changed('a');
    state = 10;
    expect(sent).toEqual([{ key: 'a', state: 1 }]);
    await waitFor('the trailing run', () => sent.length === 2);
    expect(sent[1]).toEqual({ key: 'a', state: 10 });
    throttle.changed('b');
    expect(sent.at(-1)).toEqual({ key: 'b', state: 10 });
    throttle.close();
  });

  it('now() goes out at once and takes the scheduled run with it', async () => {
    const sent: Array<{ key: string; state: number }> = [];
    let state = 1;
    const throttle = new PublishThrottle<string>({ intervalMs: 30, now: Date.now, run: (key) => sent.push({ key, state }) });
    throttle.changed('a');
    state = 2;
    throttle.changed('a');
    state = 3;
    throttle.now('a');
    expect(sent).toEqual([
      { key: 'a', state: 1 },
      { key: 'a', state: 3 },
    ]);
    // Longer than an interval: the dropped trailing run would have fired by now.
    const settled = Date.now() + 100;
    await waitFor('an interval past now()', () => Date.now() > settled);
    expect(sent).toHaveLength(2);
    throttle.close();
  });

  it('close and forget drop what is scheduled: nothing goes out after them', async () => {
    const sent: string[] = [];
    // The throttle's clock stands still: every change below is within an interval of the key's last
    // run, however late a loaded box runs the test (on Date.now a 30 ms stall made the change after
    // the trailing run go out at once, before close). Its timers are real.
    const frozenMs = Date.now();
    const throttle = new PublishThrottle<string>({ intervalMs: 30, now: () => frozenMs, run: (key) => sent.push(key) });
    throttle.changed('kept');
    throttle.changed('kept');
    throttle.changed('gone');
    throttle.changed('gone');
    throttle.forget('gone');
    await waitFor("the kept key's trailing run", () => sent.filter((k) => k === 'kept').length === 2);
    // Within the interval of that run: scheduled, then dropped by close.
    throttle.changed('kept');
    throttle.close();
    throttle.changed('kept');
    // Longer than an interval: a timer left behind would have fired by now.
    const settled = Date.now() + 100;
    await waitFor('an interval past close', () => Date.now() > settled);
    expect(sent).toEqual(['kept', 'gone', 'kept']);
  });
});
