import { describe, expect, it } from 'vitest';
import type { WorkerLiveness } from '@lanes/contracts';
import { evaluateWorkerRecords, type ListedSandbox } from '@lanes/supervision';

describe('evaluateWorkerRecords', () => {
  it.each<[string, WorkerLiveness, ListedSandbox[], 'keep' | 'forget']>([
    ['alive, no sandboxes', 'alive', [], 'keep'],
    ['unknown, no sandboxes: unknown never destroys', 'unknown', [], 'keep'],
    ['gone, no sandboxes', 'gone', [], 'forget'],
    ['gone, an orphan still listed', 'gone', [{ id: 'sb', tags: { worker: 'w' } }], 'keep'],
    ['gone, only other workers sandboxes', 'gone', [{ id: 'sb', tags: { worker: 'other' } }], 'forget'],
    ['gone, untagged sandboxes do not hold it', 'gone', [{ id: 'sb', tags: {} }], 'forget'],
  ])('%s → %s', (_what, liveness, sandboxes, action) => {
    const [d] = evaluateWorkerRecords({ sandboxes, liveness: { w: { worker: 'w', liveness, reason: 'r' } } });
    expect(d).toMatchObject({ worker: 'w', action });
    expect(d!.reason).toBeTruthy();
  });

  it('judges only workers with a verdict', () => {
    expect(evaluateWorkerRecords({ sandboxes: [{ id: 'sb', tags: { worker: 'w' } }], liveness: {} })).toEqual([]);
  });
});
