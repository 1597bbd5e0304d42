import { describe, expect, it } from 'vitest';
import type { LivenessVerdict, WorkerLiveness } from '@lanes/contracts';
import { attributeOwners, evaluateOrphans, type ListedSandbox } from '@lanes/supervision';

const sb = (id: string, worker?: string): ListedSandbox => ({ id, tags: worker === undefined ? {} : { worker, lane: 'a', slot: '0' } });
const verdicts = (entries: Record<string, WorkerLiveness>): Record<string, LivenessVerdict> =>
  Object.fromEntries(Object.entries(entries).map(([worker, liveness]) => [worker, { worker, liveness, reason: `judged ${liveness}` }]));

describe('evaluateOrphans', () => {
  it.each<[string, ListedSandbox, Record<string, WorkerLiveness>, 'reap' | 'keep']>([
    ['owner alive', sb('s', 'w1'), { w1: 'alive' }, 'keep'],
    ['owner unknown (Redis just regained, or not visible)', sb('s', 'w1'), { w1: 'unknown' }, 'keep'],
    ['owner gone', sb('s', 'w1'), { w1: 'gone' }, 'reap'],
    ['owner has no verdict: unknown', sb('s', 'w9'), { w1: 'gone' }, 'keep'],
    ['no verdicts at all: unknown', sb('s', 'w1'), {}, 'keep'],
    ['untagged: unknown', sb('s'), { w1: 'gone' }, 'keep'],
    ['empty worker tag: unknown', { id: 's', tags: { worker: '' } }, {}, 'keep'],
    ['owner named like an Object prototype key', sb('s', 'constructor'), {}, 'keep'],
    ['owner gone on Redis, but its process still runs (partitioned)', { ...sb('s', 'w1'), ownerAlive: true }, { w1: 'gone' }, 'keep'],
    ['owner gone, and the provider sees its process dead', { ...sb('s', 'w1'), ownerAlive: false }, { w1: 'gone' }, 'reap'],
    ['owner alive on Redis, process seen dead: not gone yet, keep', { ...sb('s', 'w1'), ownerAlive: false }, { w1: 'alive' }, 'keep'],
  ])('%s → %s', (_name, sandbox, liveness, action) => {
    const [d] = evaluateOrphans({ sandboxes: [sandbox], liveness: verdicts(liveness) });
    expect(d).toMatchObject({ action, id: 's' });
    expect(d?.reason).toBeTruthy();
  });

  it.each<[string, number | undefined, 'reap' | 'keep']>([
    ['silent 2999 ms, lock 3000 ms: its run may still work', 2_999, 'keep'],
    ['silent exactly the lock: keep', 3_000, 'keep'],
    ['silent 3001 ms: every run of it has fenced', 3_001, 'reap'],
    ['a gone verdict without a silence figure counts as 0 ms: keep', undefined, 'keep'],
  ])('reapAfterSilenceMs: %s → %s', (_name, silentMs, action) => {
    const liveness = { w1: { worker: 'w1', liveness: 'gone' as const, reason: 'stuck', ...(silentMs === undefined ? {} : { silentMs }) } };
    const [d] = evaluateOrphans({ sandboxes: [sb('s', 'w1')], liveness }, { reapAfterSilenceMs: 3_000 });
    expect(d?.action).toBe(action);
  });

  it('carries the liveness reason into the reap reason', () => {
    const [d] = evaluateOrphans({ sandboxes: [sb('s', 'w1')], liveness: verdicts({ w1: 'gone' }) });
    expect(d?.reason).toContain('judged gone');
  });

  it.each<[boolean, 'reap' | 'keep']>([
    [false, 'keep'],
    [true, 'reap'],
  ])('reapUntagged %s → untagged %s', (reapUntagged, action) => {
    const [d] = evaluateOrphans({ sandboxes: [sb('s')], liveness: {} }, { reapUntagged });
    expect(d?.action).toBe(action);
  });

  it('reapUntagged does not touch tagged sandboxes of unknown owners', () => {
    const [d] = evaluateOrphans({ sandboxes: [sb('s', 'w9')], liveness: {} }, { reapUntagged: true });
    expect(d?.action).toBe('keep');
  });

  it('one decision per sandbox, in input order, by id', () => {
    const out = evaluateOrphans({
      sandboxes: [sb('a', 'alive'), sb('b', 'dead'), sb('c'), sb('d', 'dead'), sb('e', 'unsure')],
      liveness: verdicts({ alive: 'alive', dead: 'gone', unsure: 'unknown' }),
    });
    expect(out.map((d) => [d.id, d.action])).toEqual([
      ['a', 'keep'],
      ['b', 'reap'],
      ['c', 'keep'],
      ['d', 'reap'],
      ['e', 'keep'],
    ]);
  });
});

describe('attributeOwners: owners from lanes’ own record when the listing carries no tags', () => {
  const record = { worker: 'w-rec', lane: 'lane-rec', slot: 's-rec' };
  it.each([
    [
      'a tagged sandbox keeps its tags, whatever the record says',
      { id: 'a', tags: { worker: 'w-tag', lane: 'l', slot: '0' } },
      { a: record },
      { worker: 'w-tag', lane: 'l', slot: '0' },
    ],
    ['an untagged sandbox takes the recorded owner, lane and slot', { id: 'b', tags: {} }, { b: record }, { worker: 'w-rec', lane: 'lane-rec', slot: 's-rec' }],
    [
      'an empty worker tag counts as untagged; listed lane and slot win',
      { id: 'c', tags: { worker: '', lane: 'l', slot: '1' } },
      { c: record },
      { worker: 'w-rec', lane: 'l', slot: '1' },
    ],
    ['an untagged sandbox lanes has no record of stays without an owner', { id: 'd', tags: {} }, {}, {}],
  ])('%s', (_name, listed, records, tags) => {
    expect(attributeOwners([listed], records)).toEqual([{ ...listed, tags }]);
  });

  it('an untagged sandbox of a gone owner is reaped once attributed; unattributed it is kept', () => {
    const liveness = { 'w-rec': { worker: 'w-rec', liveness: 'gone' as const, reason: 'beats stopped', silentMs: 10_000 } };
    const listed = [
      { id: 'mine', tags: {} },
      { id: 'stranger', tags: {} },
    ];
    const decisions = evaluateOrphans({ sandboxes: attributeOwners(listed, { mine: record }), liveness }, { reapAfterSilenceMs: 5_000 });
    expect(decisions.map((d) => [d.id, d.action])).toEqual([
      ['mine', 'reap'],
      ['stranger', 'keep'],
    ]);
  });
});
