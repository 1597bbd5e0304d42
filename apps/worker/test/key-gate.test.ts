import { DelayedError, type Job } from 'bullmq';
import pino from 'pino';
import { describe, expect, it } from 'vitest';
import type { Card, LaneEvent } from '@lanes/contracts';
import type { KeyAdmission, KeyedCard, KeyLimits } from '@lanes/queue';
import { DEFAULT_KEY_PARK_BACKSTOP_MS } from '@lanes/supervision';
import { admitByKey, releaseByKey, type KeyGateDeps } from '../src/key-gate.js';

const NOW = 1_700_000_000_000;
const log = pino({ level: 'silent' });
const card: Card = { id: 'c1', lane: 'l', title: 't', priority: 0, concurrencyKey: 'acme/a' };

/** Fakes that record every call: the key scripts' answers are given, the BullMQ moves recorded. */
function fakes(
  admissions: KeyAdmission['decision'][],
  opts: { recheck?: 'wake' | 'stay' | 'gone'; next?: string; promoteFails?: boolean; releaseThrows?: boolean; eventThrows?: boolean } = {},
) {
  const calls: string[] = [];
  const appended: LaneEvent[] = [];
  const keyLimits = {
    admit: async () => {
      const decision = admissions.shift()!;
      calls.push(`admit:${decision}`);
      return { decision, runningOthers: decision === 'park' ? 1 : 0, counted: false };
    },
    recheck: async () => {
      calls.push(`recheck:${opts.recheck ?? 'stay'}`);
      return opts.recheck ?? 'stay';
    },
    release: async (k: KeyedCard) => {
      calls.push(`release:${k.cardId}`);
      if (opts.releaseThrows) throw new Error('redis away');
      return opts.next;
    },
    toFront: async (_lane: string, id: string) => void calls.push(`front:${id}`),
  } as unknown as KeyLimits;
  const jobFor = (id: string) =>
    ({
      id,
      moveToDelayed: async (at: number, token: string) => void calls.push(`delay:${id}:${at - NOW}:${token}`),
      promote: async () => {
        calls.push(`promote:${id}`);
        if (opts.promoteFails) throw new Error('not delayed');
      },
    }) as unknown as Job;
  const deps: KeyGateDeps = {
    lane: { name: 'l', maxRunningPerKey: 1 },
    store: { create: async () => void calls.push('create') } as unknown as KeyGateDeps['store'],
    keyLimits,
    jobOf: async (id) => (id === 'gone' ? undefined : jobFor(id)),
    events: {
      append: async (e) => {
        calls.push(`event:${e.type}:${e.cardId}`);
        appended.push(e);
        if (opts.eventThrows) throw new Error('redis away');
      },
    },
    now: () => NOW,
  };
  return { deps, calls, appended, job: jobFor(card.id) };
}

describe('admitByKey', () => {
  it('applies no key limit to a card without a key, or a lane without maxRunningPerKey', async () => {
    const f = fakes([]);
    expect(await admitByKey(f.deps, f.job, { ...card, concurrencyKey: undefined }, 'tok', log)).toEqual([]);
    expect(await admitByKey({ ...f.deps, lane: { name: 'l' } }, f.job, card, 'tok', log)).toEqual([]);
    expect(f.calls).toEqual([]);
  });

  it('admits, answering the key to release', async () => {
    const f = fakes(['admit']);
    expect(await admitByKey(f.deps, f.job, card, 'tok', log)).toEqual([{ lane: 'l', cardId: 'c1', key: 'acme/a' }]);
  });

  it('a supersede key is a gate of its own, one card at a time, on any lane', async () => {
    const f = fakes(['admit', 'admit']);
    const both = { ...card, supersedeKey: 'acme/a#7' };
    expect(await admitByKey(f.deps, f.job, both, 'tok', log)).toEqual([
      { lane: 'l', cardId: 'c1', key: 'acme/a' },
      { lane: 'l', cardId: 'c1', key: 'acme/a#7', gate: 'supersede' },
    ]);
    const g = fakes(['admit']);
    expect(await admitByKey({ ...g.deps, lane: { name: 'l' } }, g.job, both, 'tok', log)).toEqual([{ lane: 'l', cardId: 'c1', key: 'acme/a#7', gate: 'supersede' }]);
  });

  it('parked at its second gate, a card gives its place at the first back', async () => {
    const f = fakes(['admit', 'park']);
    await expect(admitByKey(f.deps, f.job, { ...card, supersedeKey: 'acme/a#7' }, 'tok', log)).rejects.toBeInstanceOf(DelayedError);
    expect(f.calls).toEqual(['admit:admit', 'admit:park', `delay:c1:${DEFAULT_KEY_PARK_BACKSTOP_MS}:tok`, 'event:card.key-waiting:c1', 'recheck:stay', 'release:c1']);
    expect(f.appended[0]?.data).toMatchObject({ key: 'acme/a#7', gate: 'supersede' });
  });

  it('makes the record of a job added through BullMQ alone, then asks again', async () => {
    const f = fakes(['no-record', 'admit']);
    expect(await admitByKey(f.deps, f.job, card, 'tok', log)).toHaveLength(1);
    expect(f.calls).toEqual(['admit:no-record', 'create', 'admit:admit']);
  });

  it.each<['stay' | 'gone' | 'wake', string[]]>([
    ['stay', []],
    ['gone', []],
    ['wake', ['promote:c1', 'front:c1']],
  ])('parks over the limit: the job delayed until the backstop, with the run token; recheck %s', async (recheck, after) => {
    const f = fakes(['park'], { recheck });
    await expect(admitByKey(f.deps, f.job, card, 'tok', log)).rejects.toBeInstanceOf(DelayedError);
    expect(f.calls).toEqual(['admit:park', `delay:c1:${DEFAULT_KEY_PARK_BACKSTOP_MS}:tok`, 'event:card.key-waiting:c1', `recheck:${recheck}`, ...after]);
    expect(f.appended).toEqual([
      {
        type: 'card.key-waiting',
        at: new Date(NOW).toISOString(),
        lane: 'l',
        cardId: 'c1',
        data: { key: 'acme/a', gate: 'concurrency', reason: expect.any(String), retryAt: new Date(NOW + DEFAULT_KEY_PARK_BACKSTOP_MS).toISOString() },
      },
    ]);
  });

  it('a card.key-waiting that cannot be written leaves the card parked, and its recheck still runs', async () => {
    const f = fakes(['park'], { recheck: 'wake', eventThrows: true });
    await expect(admitByKey(f.deps, f.job, card, 'tok', log)).rejects.toBeInstanceOf(DelayedError);
    expect(f.calls).toEqual(['admit:park', `delay:c1:${DEFAULT_KEY_PARK_BACKSTOP_MS}:tok`, 'event:card.key-waiting:c1', 'recheck:wake', 'promote:c1', 'front:c1']);
  });

  it('moves nothing when another run holds the job', async () => {
    const f = fakes(['stale']);
    await expect(admitByKey(f.deps, f.job, card, 'tok', log)).rejects.toBeInstanceOf(DelayedError);
    expect(f.calls).toEqual(['admit:stale']);
  });
});

describe('releaseByKey', () => {
  const keyed = { lane: 'l', cardId: 'c1', key: 'acme/a' };
  it.each<[string, Parameters<typeof fakes>[1], string[]]>([
    ['wakes the next parked card and puts it first', { next: 'c2' }, ['release:c1', 'promote:c2', 'front:c2']],
    ['no parked card: nothing to wake', {}, ['release:c1']],
    ['a parked card no longer delayed is left as it is', { next: 'c2', promoteFails: true }, ['release:c1', 'promote:c2']],
    ['a parked card whose job is gone', { next: 'gone' }, ['release:c1']],
    ['Redis away: logged, never thrown into the run’s ending', { releaseThrows: true }, ['release:c1']],
  ])('%s', async (_name, opts, calls) => {
    const f = fakes([], opts);
    await releaseByKey(f.deps, [keyed], 'tok', log);
    expect(f.calls).toEqual(calls);
  });
});
