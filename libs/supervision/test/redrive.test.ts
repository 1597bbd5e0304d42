import { describe, expect, it } from 'vitest';
import { selectRedrive, type BlockedCard, type RedriveTrigger } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const card = (id: string, lane: string, blockedReason: BlockedCard['blockedReason'], since: number): BlockedCard => ({
  id,
  lane,
  blockedReason,
  since,
});

const BLOCKED: BlockedCard[] = [
  card('dead-new', 'a', 'sandbox-dead', NOW - 10),
  card('human', 'a', 'needs-human', NOW - 1_000),
  card('outage-old', 'a', 'provider-outage', NOW - 500),
  card('dead-old', 'a', 'sandbox-dead', NOW - 900),
  card('other-lane-dead', 'b', 'sandbox-dead', NOW - 2_000),
  card('other-lane-outage', 'b', 'provider-outage', NOW - 2_000),
];

describe('selectRedrive', () => {
  it.each<[string, RedriveTrigger, string[]]>([
    ['sandbox-live re-drives the lane’s automatic blocks, oldest first', { type: 'sandbox-live', lane: 'a' }, ['dead-old', 'outage-old', 'dead-new']],
    ['breaker-closed re-drives the same set', { type: 'breaker-closed', lane: 'a' }, ['dead-old', 'outage-old', 'dead-new']],
    ['only the trigger’s lane', { type: 'sandbox-live', lane: 'b' }, ['other-lane-dead', 'other-lane-outage']],
  ])('%s', (_name, trigger, ids) => {
    const d = selectRedrive(BLOCKED, trigger);
    expect(d).toMatchObject({ action: 'redrive', ids });
    expect(d.reason).toBeTruthy();
  });

  it.each<[string, BlockedCard[], RedriveTrigger]>([
    ['no blocked cards', [], { type: 'sandbox-live', lane: 'a' }],
    ['needs-human is never re-driven', [card('h', 'a', 'needs-human', NOW)], { type: 'breaker-closed', lane: 'a' }],
    ['another lane', [card('x', 'b', 'sandbox-dead', NOW)], { type: 'sandbox-live', lane: 'a' }],
  ])('none: %s', (_name, blocked, trigger) => {
    const d = selectRedrive(blocked, trigger);
    expect(d.action).toBe('none');
    expect(d.reason).toBeTruthy();
  });

  it('orders equal `since` by id and drops duplicate ids', () => {
    const d = selectRedrive([card('b', 'a', 'sandbox-dead', NOW), card('a', 'a', 'sandbox-dead', NOW), card('b', 'a', 'sandbox-dead', NOW)], { type: 'sandbox-live', lane: 'a' });
    expect(d).toMatchObject({ action: 'redrive', ids: ['a', 'b'] });
  });

  it('orders by since with 1 ms apart', () => {
    const d = selectRedrive([card('late', 'a', 'sandbox-dead', NOW + 1), card('early', 'a', 'provider-outage', NOW - 1), card('mid', 'a', 'sandbox-dead', NOW)], {
      type: 'breaker-closed',
      lane: 'a',
    });
    expect(d).toMatchObject({ action: 'redrive', ids: ['early', 'mid', 'late'] });
  });

  it('does not mutate its input', () => {
    const input = structuredClone(BLOCKED);
    selectRedrive(input, { type: 'sandbox-live', lane: 'a' });
    expect(input).toEqual(BLOCKED);
  });
});
