import { describe, expect, it } from 'vitest';
import { EventTypeSchema, type Verdict } from '@lanes/contracts';
import { VERDICT_EVENT_TYPES, slotVerdictsOf, type VerdictEvent } from '@lanes/supervision';

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

describe('VERDICT_EVENT_TYPES: what a reader of the stream for slotVerdictsOf may not skip', () => {
  it.each(EventTypeSchema.options)('%s is listed exactly when some event of it reads as a verdict', (type) => {
    const withOutage = ev(type, { data: { blockedReason: 'provider-outage' } });
    const speaks = slotVerdictsOf([ev(type), withOutage], 'a').length > 0;
    expect(VERDICT_EVENT_TYPES.has(type)).toBe(speaks);
  });
});
