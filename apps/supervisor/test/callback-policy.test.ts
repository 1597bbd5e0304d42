import { describe, expect, it } from 'vitest';
import { evaluateCallback, isNotified, selectDeliveries } from '@lanes/supervisor';

const config = { maxAttempts: 3, baseDelayMs: 1_000 };

describe('evaluateCallback', () => {
  it.each([
    [{ status: 200 }, 1, 'done'],
    [{ status: 204 }, 3, 'done'],
    [{ status: 500 }, 1, 'retry'],
    [{ status: 503 }, 2, 'retry'],
    [{ status: 503 }, 3, 'give-up'],
    [{ status: 408 }, 1, 'retry'],
    [{ status: 429 }, 1, 'retry'],
    [{ status: 400 }, 1, 'give-up'],
    [{ status: 404 }, 1, 'give-up'],
    [{ status: 302 }, 1, 'retry'],
    [{ error: 'ECONNREFUSED' }, 1, 'retry'],
    [{ error: 'timeout' }, 3, 'give-up'],
  ] as const)('%j on attempt %i → %s', (result, attempt, action) => {
    expect(evaluateCallback(result, attempt, config).action).toBe(action);
  });

  it.each([
    [1, 1_000],
    [2, 2_000],
  ])('backs off: after attempt %i waits %i ms', (attempt, delayMs) => {
    expect(evaluateCallback({ status: 502 }, attempt, config)).toMatchObject({ action: 'retry', delayMs });
  });
});

describe('isNotified', () => {
  it.each([
    ['card.done', true],
    ['card.failed', true],
    ['card.cancelled', true],
    ['card.blocked', true],
    ['card.running', false],
    ['card.queued', false],
    ['card.redriven', false],
    ['sandbox.dead', false],
  ] as const)('%s → %s', (type, notified) => {
    expect(isNotified(type)).toBe(notified);
  });
});

describe('selectDeliveries', () => {
  const config = { maxInFlightPerHost: 2, maxInFlightPerLane: 3, maxInFlight: 3 };
  const d = (id: string, host: string, cardId = id, lane = 'L') => ({ id, host, cardId, lane });
  it.each<[string, ReturnType<typeof d>[], ReturnType<typeof d>[], string[]]>([
    ['nothing waiting', [], [], []],
    ['under every bound: all start, in order', [d('1', 'a'), d('2', 'b')], [], ['1', '2']],
    ['a host at its bound waits; another host goes on', [d('1', 'a'), d('2', 'a'), d('3', 'b')], [d('0', 'a')], ['1', '3']],
    ['a blackholed host full: only other hosts start', [d('5', 'a'), d('6', 'b'), d('7', 'a')], [d('3', 'a'), d('4', 'a')], ['6']],
    ['the total bound holds across hosts', [d('1', 'a'), d('2', 'b'), d('3', 'c'), d('4', 'd')], [], ['1', '2', '3']],
    ['the total bound counts what is in flight', [d('4', 'd')], [d('1', 'a'), d('2', 'b'), d('3', 'c')], []],
    ['a card in flight holds its next event', [d('2', 'a', 'x'), d('3', 'a', 'y')], [d('1', 'a', 'x')], ['3']],
    ['a card waiting on its host holds its later event on another slot', [d('2', 'a', 'x'), d('3', 'a', 'x')], [d('0', 'a'), d('1', 'a')], []],
    ['two events of one card: only the first starts', [d('1', 'a', 'x'), d('2', 'a', 'x')], [], ['1']],
    ['one below each bound (±1): the last slot of host and total is taken', [d('3', 'a'), d('4', 'b')], [d('1', 'a'), d('2', 'c')], ['3']],
  ])('%s', (_name, queued, active, expected) => {
    expect(selectDeliveries({ queued: byHost(queued), active }, config)).toEqual(expected);
  });

  const lanes = { maxInFlightPerHost: 2, maxInFlightPerLane: 2, maxInFlight: 5 };
  it.each<[string, ReturnType<typeof d>[], ReturnType<typeof d>[], string[]]>([
    [
      "a lane at its bound waits on every host; another lane's goes on",
      [d('2', 'b', '2', 'A'), d('3', 'c', '3', 'A'), d('4', 'd', '4', 'B')],
      [d('0', 'a', '0', 'A'), d('1', 'e', '1', 'A')],
      ['4'],
    ],
    ['one below the lane bound: its last place is taken, once', [d('2', 'b', '2', 'A'), d('3', 'c', '3', 'A')], [d('1', 'a', '1', 'A')], ['2']],
    ["a card held by its lane's bound holds its later event", [d('2', 'b', 'x', 'A'), d('3', 'c', 'x', 'A')], [d('0', 'a', '0', 'A'), d('1', 'e', '1', 'A')], []],
  ])('%s', (_name, queued, active, expected) => {
    expect(selectDeliveries({ queued: byHost(queued), active }, lanes)).toEqual(expected);
  });

  function byHost(queued: ReturnType<typeof d>[]): Map<string, ReturnType<typeof d>[]> {
    const map = new Map<string, ReturnType<typeof d>[]>();
    for (const q of queued) map.set(q.host, [...(map.get(q.host) ?? []), q]);
    return map;
  }
});
