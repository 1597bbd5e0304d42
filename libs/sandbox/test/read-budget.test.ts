import { describe, expect, it } from 'vitest';
import { READ_WINDOW_MS, decideRead, paceRead, type ReadWindow } from '../src/read-budget.js';

/** 1,000 bytes a second: a window's share is 100 bytes. */
const RATE = 1_000;

describe('decideRead', () => {
  it.each<[string, ReadWindow | undefined, number, number, ReturnType<typeof decideRead>]>([
    ['the first bytes open a window', undefined, 40, 5, { action: 'read', window: { startedAtMs: 5, bytes: 40 } }],
    ['under the share, reading goes on', { startedAtMs: 0, bytes: 40 }, 50, 30, { action: 'read', window: { startedAtMs: 0, bytes: 90 } }],
    ['reaching the share pauses until the window ends', { startedAtMs: 0, bytes: 90 }, 10, 30, { action: 'pause', resumeInMs: 70, window: { startedAtMs: 0, bytes: 100 } }],
    ['one chunk over the share pauses the same', undefined, 5_000, 0, { action: 'pause', resumeInMs: READ_WINDOW_MS, window: { startedAtMs: 0, bytes: 5_000 } }],
    ['a window that has ended starts a new one', { startedAtMs: 0, bytes: 100 }, 10, READ_WINDOW_MS, { action: 'read', window: { startedAtMs: READ_WINDOW_MS, bytes: 10 } }],
    [
      'just before the window ends, the pause is what is left of it',
      { startedAtMs: 0, bytes: 100 },
      10,
      READ_WINDOW_MS - 1,
      { action: 'pause', resumeInMs: 1, window: { startedAtMs: 0, bytes: 110 } },
    ],
  ])('%s', (_what, window, bytes, nowMs, expected) => {
    expect(decideRead(window, bytes, nowMs, RATE)).toEqual(expected);
  });
});

describe('paceRead: a pulling reader pays for each chunk in time', () => {
  const RATE = 1_000_000;
  it.each<[string, number | undefined, number, number, { readyAtMs: number; waitMs: number }]>([
    ['an idle reader takes a window’s share at once', undefined, 100_000, 1_000, { readyAtMs: 1_000, waitMs: 0 }],
    ['a MiB at 1 MB/s waits nearly a second, however it came in one message', undefined, 1_000_000, 1_000, { readyAtMs: 1_900, waitMs: 900 }],
    ['debt carries on from when the last chunk was paid', 1_900, 500_000, 1_000, { readyAtMs: 2_400, waitMs: 1_400 }],
    ['idle time earns one window’s credit, no more', 0, 200_000, 10_000, { readyAtMs: 10_100, waitMs: 100 }],
  ])('%s', (_name, readyAtMs, bytes, nowMs, expected) => {
    expect(paceRead(readyAtMs, bytes, nowMs, RATE)).toEqual(expected);
  });
});
