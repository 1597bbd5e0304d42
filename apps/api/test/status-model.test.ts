import { describe, expect, it } from 'vitest';
import type { LaneStatus, SandboxRecord, SlotStatus } from '@lanes/contracts';
import {
  applyEvent,
  blockedByReason,
  lanesWithBlocked,
  withBlocked,
  countsOf,
  emptyModel,
  eventOf,
  exitCodeText,
  parseFrame,
  recentStreamId,
  sandboxView,
  sandboxesToLookUp,
  verdictOf,
  withDeathRecord,
  withLanes,
  type PageEvent,
} from '../src/status-page/assets/status-model.js';

const AT = '2026-11-29T12:00:00.000Z';
const slot = (sandbox?: SlotStatus['sandbox'], cardId?: string): SlotStatus => ({ slot: 's0', worker: 'w1', ...(sandbox ? { sandbox } : {}), ...(cardId ? { cardId } : {}) });
const lane = (slots: SlotStatus[], counts: Record<string, number> = {}): LaneStatus => ({
  name: 'pr',
  provider: 'local',
  counts,
  slots,
  breaker: { state: 'closed', failures: 0 },
  desiredSlots: 1,
  outage: false,
});
const dead = (sandboxId: string, observedExitCode: number | 'unknown', reason = 'poll: sandbox exited'): PageEvent => ({
  type: 'sandbox.dead',
  at: AT,
  lane: 'pr',
  slot: 's0',
  sandboxId,
  data: { observedExitCode, reason },
});

describe('sandboxView', () => {
  it.each<[string, SlotStatus['sandbox'], Parameters<typeof sandboxView>[1], ReturnType<typeof sandboxView>]>([
    ['no sandbox', undefined, undefined, { state: 'none' }],
    ['live', { id: 'sb-1', state: 'live', pid: 42 }, undefined, { state: 'live', id: 'sb-1', pid: 42 }],
    ['dead with its exit code', { id: 'sb-1', state: 'dead', observedExitCode: 137 }, undefined, { state: 'dead', id: 'sb-1', observedExitCode: 137 }],
    ['dead, exit 0 stays 0', { id: 'sb-1', state: 'dead', observedExitCode: 0 }, undefined, { state: 'dead', id: 'sb-1', observedExitCode: 0 }],
    ['dead, nothing observed', { id: 'sb-1', state: 'dead' }, undefined, { state: 'dead', id: 'sb-1', observedExitCode: 'unknown' }],
    [
      'dead, with the reason the page saw',
      { id: 'sb-1', state: 'dead', observedExitCode: 137 },
      { sandboxId: 'sb-1', observedExitCode: 137, reason: 'killed' },
      { state: 'dead', id: 'sb-1', observedExitCode: 137, reason: 'killed' },
    ],
    [
      'a death of another sandbox lends nothing',
      { id: 'sb-2', state: 'dead' },
      { sandboxId: 'sb-1', observedExitCode: 137, reason: 'old' },
      { state: 'dead', id: 'sb-2', observedExitCode: 'unknown' },
    ],
    ['creating after a death: respawning', { id: 'sb-1', state: 'creating', observedExitCode: 1 }, undefined, { state: 'respawning', id: 'sb-1', observedExitCode: 1 }],
    ['creating, first sandbox: starting', { id: 'sb-1', state: 'creating' }, undefined, { state: 'starting' }],
    ['terminated', { id: 'sb-1', state: 'terminated' }, undefined, { state: 'terminated', id: 'sb-1' }],
  ])('%s', (_name, sandbox, death, want) => {
    expect(sandboxView(slot(sandbox), death)).toEqual(want);
  });
});

describe('verdictOf', () => {
  it.each<[string, PageEvent, string | undefined]>([
    ['sandbox.dead is sandbox-dead', dead('sb-1', 137), 'sandbox-dead'],
    [
      'a card event carries its verdict',
      { type: 'card.blocked', at: AT, lane: 'pr', cardId: 'c1', data: { verdict: 'provider-outage', message: 'breaker open' } },
      'provider-outage',
    ],
    ['a retry after a failed command', { type: 'card.queued', at: AT, lane: 'pr', cardId: 'c1', data: { verdict: 'command-failed' } }, 'command-failed'],
    ['done is ok', { type: 'card.done', at: AT, lane: 'pr', cardId: 'c1' }, 'ok'],
    ['a card starting is no verdict', { type: 'card.running', at: AT, lane: 'pr', cardId: 'c1' }, undefined],
    ['an unknown event type is no verdict', { type: 'slot.added', at: AT, lane: 'pr', slot: 's9' }, undefined],
  ])('%s', (_name, event, want) => {
    expect(verdictOf(event)?.verdict).toBe(want);
  });

  it('keeps the exit code and reason of a death', () => {
    expect(verdictOf(dead('sb-1', 0, 'poll: sandbox exited(0)'))).toMatchObject({ observedExitCode: 0, reason: 'poll: sandbox exited(0)', sandboxId: 'sb-1', slot: 's0' });
  });
});

describe('applyEvent', () => {
  const live = withLanes(emptyModel(), [lane([slot({ id: 'sb-1', state: 'live', pid: 7 }, 'c1')])]);

  it('shows a death on its slot at once, with the exit code, and asks for a refresh', () => {
    const { model, refresh } = applyEvent(live, dead('sb-1', 137, 'poll: sandbox exited(137)'));
    const s = model.lanes[0]!.slots[0]!;
    expect(sandboxView(s, model.deaths['pr/s0'])).toEqual({ state: 'dead', id: 'sb-1', pid: 7, observedExitCode: 137, reason: 'poll: sandbox exited(137)' });
    expect(model.verdicts[0]).toMatchObject({ verdict: 'sandbox-dead', observedExitCode: 137 });
    expect(refresh).toBe(true);
  });

  it('leaves a live replacement alone when an old death is replayed', () => {
    const replaced = withLanes(emptyModel(), [lane([slot({ id: 'sb-2', state: 'live' })])]);
    const { model } = applyEvent(replaced, dead('sb-1', 137));
    expect(model.lanes[0]!.slots[0]!.sandbox).toEqual({ id: 'sb-2', state: 'live' });
    expect(model.deaths['pr/s0']).toMatchObject({ sandboxId: 'sb-1', observedExitCode: 137 });
  });

  it('takes an unknown event type without harm and refreshes', () => {
    const { model, refresh } = applyEvent(live, { type: 'slot.added', at: AT, lane: 'pr', slot: 's1' });
    expect(model).toEqual(live);
    expect(refresh).toBe(true);
  });

  it('keeps the newest verdicts first, at most MAX_VERDICTS', () => {
    let model = live;
    for (let i = 0; i < 40; i++) model = applyEvent(model, { type: 'card.done', at: AT, lane: 'pr', cardId: `c${i}` }).model;
    expect(model.verdicts).toHaveLength(30);
    expect(model.verdicts[0]!.cardId).toBe('c39');
  });
});

describe('dead sandboxes the page has not seen die', () => {
  const record: SandboxRecord = { id: 'sb-1', provider: 'local', state: 'dead', lane: 'pr', slot: 's0', worker: 'w1', observedExitCode: 137, reason: 'killed', deadAt: AT };

  it('are looked up, and their record supplies the reason', () => {
    const model = withLanes(emptyModel(), [lane([slot({ id: 'sb-1', state: 'creating', observedExitCode: 137 })])]);
    expect(sandboxesToLookUp(model)).toEqual(['sb-1']);
    const known = withDeathRecord(model, record);
    expect(sandboxesToLookUp(known)).toEqual([]);
    expect(sandboxView(known.lanes[0]!.slots[0]!, known.deaths['pr/s0'])).toMatchObject({ state: 'respawning', reason: 'killed' });
  });

  it('a live slot needs no look-up, and a later death seen live is not overwritten by an older record', () => {
    const model = applyEvent(withLanes(emptyModel(), [lane([slot({ id: 'sb-2', state: 'live' })])]), {
      ...dead('sb-2', 1, 'newer'),
      at: '2026-11-29T12:05:00.000Z',
    }).model;
    expect(sandboxesToLookUp(withLanes(emptyModel(), [lane([slot({ id: 'sb-2', state: 'live' })])]))).toEqual([]);
    expect(withDeathRecord(model, record).deaths['pr/s0']).toMatchObject({ sandboxId: 'sb-2', reason: 'newer' });
  });
});

describe('frames and counts', () => {
  it.each<[string, string, ReturnType<typeof parseFrame>]>([
    ['an event', 'id: 1-0\nevent: card.done\ndata: {"a":1}', { id: '1-0', event: 'card.done', data: '{"a":1}' }],
    ['the opening id-only frame', ': lanes events\nid: 5-0', { id: '5-0' }],
    ['a keepalive', ': keepalive', {}],
    ['multi-line data', 'data: a\ndata: b', { data: 'a\nb' }],
    ['no space after the colon', 'id:7-1', { id: '7-1' }],
  ])('parseFrame: %s', (_name, text, want) => {
    expect(parseFrame(text)).toEqual(want);
  });

  it.each<[string, string | undefined, boolean]>([
    ['a lane event', '{"type":"card.done","lane":"pr","at":"x"}', true],
    ['an unknown type is still an event', '{"type":"slot.added","lane":"pr","at":"x"}', true],
    ['not JSON', '{nope', false],
    ['JSON without a type', '{"lane":"pr"}', false],
    ['no data', undefined, false],
  ])('eventOf: %s', (_name, data, isEvent) => {
    expect(eventOf(data === undefined ? {} : { data }) !== undefined).toBe(isEvent);
  });

  it('counts in a fixed order, then blocked by reason (zero reasons left out)', () => {
    const { states, blocked } = countsOf({ counts: { active: 1, waiting: 2, blocked: 3, 'blocked:sandbox-dead': 2, 'blocked:needs-human': 1, 'blocked:provider-outage': 0 } });
    expect(states).toEqual([
      ['waiting', 2],
      ['prioritized', 0],
      ['delayed', 0],
      ['active', 1],
      ['completed', 0],
      ['failed', 0],
      ['blocked', 3],
    ]);
    expect(blocked).toEqual([
      ['needs-human', 1],
      ['sandbox-dead', 2],
    ]);
  });

  it.each<[number | 'unknown' | undefined, string]>([
    [0, '0'],
    [137, '137'],
    [-1, '-1'],
    ['unknown', 'unknown'],
    [undefined, 'unknown'],
  ])('exitCodeText(%j) is %s', (code, text) => {
    expect(exitCodeText(code)).toBe(text);
  });

  it('recentStreamId replays the window before now, never below zero', () => {
    expect(recentStreamId(1_000_000, 1_000)).toBe('999000-0');
    expect(recentStreamId(10, 1_000)).toBe('0-0');
  });
});

describe('blocked cards', () => {
  const card = (id: string, blockedReason: string) => ({ id, blockedReason, since: AT });

  it('group by reason, reasons in name order, cards in the order given', () => {
    expect(blockedByReason([card('a', 'sandbox-dead'), card('b', 'needs-human'), card('c', 'sandbox-dead')])).toEqual([
      ['needs-human', [card('b', 'needs-human')]],
      ['sandbox-dead', [card('a', 'sandbox-dead'), card('c', 'sandbox-dead')]],
    ]);
    expect(blockedByReason(undefined)).toEqual([]);
  });

  it('are read for lanes that have any, and cleared for a lane that has none left', () => {
    const model = withLanes(emptyModel(), [lane([], { blocked: 2 }), { ...lane([], { blocked: 0 }), name: 'quiet' }]);
    expect(lanesWithBlocked(model)).toEqual(['pr']);
    const listed = withBlocked(model, 'pr', { lane: 'pr', total: 1, cards: [card('a', 'needs-human')] });
    expect(listed.blocked['pr']?.total).toBe(1);
    expect(withBlocked(listed, 'pr', undefined).blocked).toEqual({});
  });
});
