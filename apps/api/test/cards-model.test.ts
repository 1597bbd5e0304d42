import { describe, expect, it } from 'vitest';
import type { CardSummary, HistoryEntry } from '@lanes/contracts';
import {
  CARDS_RECENT_LISTED,
  CARDS_RUNNING_LISTED,
  HISTORY_ENTRIES_SHOWN,
  OUTPUT_LINE_CHARS,
  OUTPUT_LINES_KEPT,
  RESULT_CHARS_SHOWN,
  ageText,
  cardListPaths,
  cardStateText,
  historyEntryText,
  historyShown,
  isCardEvent,
  isTerminalState,
  keepLastLines,
  mergeCardLists,
  outputLinesOf,
  resultText,
  tailLines,
} from '../src/status-page/assets/cards-model.js';

const AT = '2026-11-29T12:00:00.000Z';
const NOW = Date.parse(AT);
const card = (id: string, state: CardSummary['state'] = 'done'): CardSummary => ({
  id,
  lane: 'pr',
  title: id,
  priority: 0,
  state,
  attempts: 1,
  infraRetries: 0,
  createdAt: AT,
  updatedAt: AT,
});
const cards = (prefix: string, n: number, state?: CardSummary['state']) => Array.from({ length: n }, (_, i) => card(`${prefix}${i}`, state));
const entry = (over: Partial<HistoryEntry> = {}): HistoryEntry => ({ at: AT, state: 'running', attempt: 1, ...over });

describe('which cards a lane lists', () => {
  it('reads two pages: the running cards and the latest, each within its cap, the lane name encoded', () => {
    expect(cardListPaths('a b')).toEqual({
      running: `/v1/cards?lane=a%20b&state=running&limit=${CARDS_RUNNING_LISTED}`,
      recent: `/v1/cards?lane=a%20b&limit=${CARDS_RECENT_LISTED}`,
    });
  });

  it('lists the running cards first, then the latest others, each card once and within the caps', () => {
    expect(mergeCardLists([card('r1', 'running')], [card('d1'), card('r1', 'running'), card('d2')]).map((c) => c.id)).toEqual(['r1', 'd1', 'd2']);
    const merged = mergeCardLists(cards('r', CARDS_RUNNING_LISTED + 5, 'running'), cards('d', CARDS_RECENT_LISTED + 5));
    expect(merged).toHaveLength(CARDS_RUNNING_LISTED + CARDS_RECENT_LISTED);
    expect(mergeCardLists(undefined, undefined)).toEqual([]);
  });

  it.each([
    [{ type: 'card.running', lane: 'pr', cardId: 'c1' }, true],
    [{ type: 'card.retried', lane: 'pr', cardId: 'c1' }, true],
    [{ type: 'card.done', lane: 'pr' }, false],
    [{ type: 'sandbox.dead', lane: 'pr', cardId: 'c1' }, false],
  ])('%o is a card event: %s', (e, expected) => {
    expect(isCardEvent(e)).toBe(expected);
  });

  it.each([
    ['done', true],
    ['failed', true],
    ['cancelled', true],
    ['running', false],
    ['queued', false],
    ['blocked', false],
  ])('%s has ended its run: %s', (state, expected) => {
    expect(isTerminalState(state)).toBe(expected);
  });
});

describe('how a card reads', () => {
  it.each([
    [0, '0s'],
    [59_999, '59s'],
    [60_000, '1m'],
    [3_599_999, '59m'],
    [3_600_000, '1h'],
    [86_399_999, '23h'],
    [86_400_000, '1d'],
    [-5_000, '0s'],
  ])('%i ms old reads %s', (ms, text) => {
    expect(ageText(AT, NOW + ms)).toBe(text);
  });

  it('says nothing of an age it cannot read', () => {
    expect(ageText('not a time', NOW)).toBe('');
  });

  it('qualifies a state with its reason or detail', () => {
    expect(cardStateText({ state: 'blocked', blockedReason: 'needs-human' })).toBe('blocked (needs-human)');
    expect(cardStateText({ state: 'failed', failedReason: 'timeout' })).toBe('failed (timeout)');
    expect(cardStateText({ state: 'queued', stateDetail: 'waiting (key limit)' })).toBe('queued (waiting (key limit))');
    expect(cardStateText({ state: 'done' })).toBe('done');
  });

  it('writes a history entry with what it has, an exit code 0 kept', () => {
    expect(historyEntryText(entry({ sandboxId: 'sb1', message: 'slot s0' }))).toBe('running · attempt 1 · sandbox sb1: slot s0');
    expect(historyEntryText(entry({ state: 'blocked', blockedReason: 'sandbox-dead', verdict: 'sandbox-dead', observedExitCode: 0, retryAt: AT }))).toBe(
      `blocked (sandbox-dead) · attempt 1 · verdict sandbox-dead · observed exit 0 · retry at ${AT}`,
    );
    expect(historyEntryText(entry({ state: 'failed', exitCode: 3 }))).toBe('failed · attempt 1 · exit 3');
  });

  it('shows the newest history entries within the cap, and counts those not shown', () => {
    const history = Array.from({ length: HISTORY_ENTRIES_SHOWN + 3 }, (_, i) => entry({ attempt: i }));
    const shown = historyShown({ history, historyDropped: 7 });
    expect(shown.entries).toHaveLength(HISTORY_ENTRIES_SHOWN);
    expect(shown.entries[0]!.attempt).toBe(3);
    expect(shown.hidden).toBe(10);
    expect(historyShown({ history: [entry()] })).toEqual({ entries: [entry()], hidden: 0 });
  });

  it('writes a result as indented JSON, cut at the cap; none is undefined, a falsy result is kept', () => {
    expect(resultText({ pr: 1 })).toBe('{\n  "pr": 1\n}');
    expect(resultText(0)).toBe('0');
    expect(resultText(undefined)).toBeUndefined();
    const long = resultText('x'.repeat(RESULT_CHARS_SHOWN * 2))!;
    expect(long).toHaveLength(RESULT_CHARS_SHOWN + 1);
    expect(long.endsWith('…')).toBe(true);
  });
});

describe('output lines the page keeps', () => {
  it('keeps the newest lines within the cap, in order, each cut at its own cap', () => {
    const kept = keepLastLines(['a'], ['b', 'c']);
    expect(kept).toEqual(['a', 'b', 'c']);
    const many = keepLastLines(
      [],
      Array.from({ length: OUTPUT_LINES_KEPT + 10 }, (_, i) => `l${i}`),
    );
    expect(many).toHaveLength(OUTPUT_LINES_KEPT);
    expect(many[0]).toBe('l10');
    const [cut] = keepLastLines([], ['y'.repeat(OUTPUT_LINE_CHARS + 1)]);
    expect(cut).toBe(`${'y'.repeat(OUTPUT_LINE_CHARS)}…`);
  });

  it('reads a card tail as lines, without a last empty one', () => {
    expect(tailLines('one\n[stderr] two\n')).toEqual(['one', '[stderr] two']);
    expect(tailLines('one')).toEqual(['one']);
    expect(tailLines(undefined)).toEqual([]);
  });

  it('reads the lines of an output frame only, never throwing on a bad one', () => {
    expect(outputLinesOf({ id: '1-0', event: 'output', data: JSON.stringify({ lines: ['<b>x</b>', 2, 'y'] }) })).toEqual(['<b>x</b>', 'y']);
    expect(outputLinesOf({ id: '1-1', event: 'end', data: '{"state":"done"}' })).toEqual([]);
    expect(outputLinesOf({ event: 'output', data: 'not json' })).toEqual([]);
    expect(outputLinesOf({ event: 'output', data: '{"lines":"no"}' })).toEqual([]);
    expect(outputLinesOf({ event: 'output' })).toEqual([]);
  });
});
