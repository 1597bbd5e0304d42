import { describe, expect, it } from 'vitest';
import { evaluateOrphans, type ListedSandbox } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const TIMEOUT_MS = 4_000;
const sb = (id: string, worker?: string): ListedSandbox => ({ id, tags: worker === undefined ? {} : { worker, lane: 'a', slot: '0' } });

describe('evaluateOrphans', () => {
  it.each<[string, ListedSandbox, Record<string, number>, 'reap' | 'keep']>([
    ['owner beat just now', sb('s', 'w1'), { w1: NOW }, 'keep'],
    ['owner beat timeout − 1 ms ago', sb('s', 'w1'), { w1: NOW - TIMEOUT_MS + 1 }, 'keep'],
    ['owner beat exactly timeout ago', sb('s', 'w1'), { w1: NOW - TIMEOUT_MS }, 'keep'],
    ['owner beat timeout + 1 ms ago: expired', sb('s', 'w1'), { w1: NOW - TIMEOUT_MS - 1 }, 'reap'],
    ['owner long gone', sb('s', 'w1'), { w1: NOW - 3_600_000 }, 'reap'],
    ['owner beat in the future (skew)', sb('s', 'w1'), { w1: NOW + 5_000 }, 'keep'],
    ['owner never seen: unknown', sb('s', 'w9'), { w1: NOW - 3_600_000 }, 'keep'],
    ['no heartbeats at all: unknown', sb('s', 'w1'), {}, 'keep'],
    ['untagged: unknown', sb('s'), { w1: NOW - 3_600_000 }, 'keep'],
    ['empty worker tag: unknown', { id: 's', tags: { worker: '' } }, {}, 'keep'],
    ['owner named like an Object prototype key', sb('s', 'constructor'), {}, 'keep'],
    ['garbage heartbeat value is not a finding', sb('s', 'w1'), { w1: Number.NaN }, 'keep'],
  ])('%s → %s', (_name, sandbox, heartbeats, action) => {
    const [d] = evaluateOrphans([sandbox], heartbeats, TIMEOUT_MS, NOW);
    expect(d).toMatchObject({ action, id: 's' });
    expect(d?.reason).toBeTruthy();
  });

  it.each<[boolean, 'reap' | 'keep']>([
    [false, 'keep'],
    [true, 'reap'],
  ])('reapUntagged %s → untagged %s', (reapUntagged, action) => {
    const [d] = evaluateOrphans([sb('s')], {}, TIMEOUT_MS, NOW, { reapUntagged });
    expect(d?.action).toBe(action);
  });

  it('reapUntagged does not touch tagged sandboxes of unknown owners', () => {
    const [d] = evaluateOrphans([sb('s', 'w9')], {}, TIMEOUT_MS, NOW, { reapUntagged: true });
    expect(d?.action).toBe('keep');
  });

  it('one decision per sandbox, in input order, by id', () => {
    const out = evaluateOrphans(
      [sb('a', 'alive'), sb('b', 'dead'), sb('c'), sb('d', 'dead')],
      { alive: NOW - 1, dead: NOW - TIMEOUT_MS - 1 },
      TIMEOUT_MS,
      NOW,
    );
    expect(out.map((d) => [d.id, d.action])).toEqual([
      ['a', 'keep'],
      ['b', 'reap'],
      ['c', 'keep'],
      ['d', 'reap'],
    ]);
  });
});
