import { describe, expect, it } from 'vitest';
import { evaluateWorkerRecords } from '@lanes/supervision';

const NOW = 1_000_000;
const TIMEOUT = 4_000;

describe('evaluateWorkerRecords', () => {
  it.each([
    ['fresh beat, no sandboxes', NOW - 100, [], 'keep'],
    ['exactly at the timeout', NOW - TIMEOUT, [], 'keep'],
    ['1 ms past the timeout, no sandboxes', NOW - TIMEOUT - 1, [], 'forget'],
    ['expired, an orphan still listed', NOW - TIMEOUT - 1, [{ id: 'sb', tags: { worker: 'w' } }], 'keep'],
    ['expired, only other workers sandboxes', NOW - 60_000, [{ id: 'sb', tags: { worker: 'other' } }], 'forget'],
    ['expired, untagged sandboxes do not hold it', NOW - 60_000, [{ id: 'sb', tags: {} }], 'forget'],
  ] as const)('%s → %s', (_what, beat, sandboxes, action) => {
    const [d] = evaluateWorkerRecords({ w: beat }, sandboxes, TIMEOUT, NOW);
    expect(d).toMatchObject({ worker: 'w', action });
    expect(d!.reason).toBeTruthy();
  });
});
