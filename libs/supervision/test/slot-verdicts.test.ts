import { describe, expect, it } from 'vitest';
import type { Verdict } from '@lanes/contracts';
import { slotVerdictsOf, type VerdictEvent, type VerdictMemo } from '@lanes/supervision';

const AT = '2026-01-01T00:00:00.000Z';
const ev = (type: VerdictEvent['type'], extra: Partial<VerdictEvent> = {}): VerdictEvent => ({ type, at: AT, lane: 'a', slot: '0', ...extra });

describe('slotVerdictsOf', () => {
  it.each<[string, VerdictEvent, Verdict | undefined]>([
    ['sandbox.dead', ev('sandbox.dead'), 'sandbox-dead'],
    ['card blocked for provider-outage', ev('card.blocked', { data: { blockedReason: 'provider-outage' } }), 'provider-outage'],
    ['card blocked for sandbox-dead says nothing more', ev('card.blocked', { data: { blockedReason: 'sandbox-dead' } }), undefined],
    ['sandbox.live', ev('sandbox.live'), 'ok'],
    ['sandbox.respawned', ev('sandbox.respawned'), 'ok'],
    ['card.done', ev('card.done'), 'ok'],
    ['card.failed is the card’s own business', ev('card.failed'), undefined],
    ['another lane', ev('sandbox.dead', { lane: 'b' }), undefined],
    ['no slot', { type: 'sandbox.dead', at: AT, lane: 'a' }, undefined],
  ])('%s → %s', (_what, event, verdict) => {
    const out = slotVerdictsOf([event], 'a');
    expect(out).toEqual(verdict ? [{ slot: '0', verdict, at: Date.parse(AT) }] : []);
  });
});

describe('slotVerdictsOf with a memo', () => {
  /** An event that counts the reads of its time: parsing it is the cost the memo saves. */
  function counted(type: VerdictEvent['type'], lane = 'a'): { event: VerdictEvent; reads: () => number } {
    let reads = 0;
    const event = { type, lane, slot: '0' } as VerdictEvent;
    Object.defineProperty(event, 'at', {
      get: () => {
        reads += 1;
        return AT;
      },
    });
    return { event, reads: () => reads };
  }

  it('works each event out once: the same answer again without reading its time again', () => {
    const done = counted('card.done');
    const failed = counted('card.failed');
    const memo: VerdictMemo = new WeakMap();
    const first = slotVerdictsOf([done.event, failed.event], 'a', memo);
    expect(first).toEqual([{ slot: '0', verdict: 'ok', at: Date.parse(AT) }]);
    expect(done.reads()).toBe(1);
    expect(slotVerdictsOf([done.event, failed.event], 'a', memo)).toEqual(first);
    expect(done.reads()).toBe(1);
    // An event of another lane is not judged for this one, and stays unjudged for its own.
    const other = counted('sandbox.dead', 'b');
    expect(slotVerdictsOf([other.event], 'a', memo)).toEqual([]);
    expect(slotVerdictsOf([other.event], 'b', memo)).toEqual([{ slot: '0', verdict: 'sandbox-dead', at: Date.parse(AT) }]);
  });
});
