import { describe, expect, it } from 'vitest';
import { evaluateKeyAdmission, hasKeyRoom, type KeyAdmissionSnapshot } from '@lanes/supervision';

const NOW = 1_700_000_000_000;
const config = { maxRunningPerKey: 2, parkBackstopMs: 30_000 };

describe('evaluateKeyAdmission', () => {
  it.each<[string, KeyAdmissionSnapshot, 'admit' | 'park' | 'stale']>([
    ['no other card of the key runs', { lock: 'this-run', counted: false, runningOthers: 0 }, 'admit'],
    ['one below the limit (max − 1 running)', { lock: 'this-run', counted: false, runningOthers: 1 }, 'admit'],
    ['at the limit', { lock: 'this-run', counted: false, runningOthers: 2 }, 'park'],
    ['over the limit (a limit lowered under running cards)', { lock: 'this-run', counted: false, runningOthers: 3 }, 'park'],
    ['at the limit, but counted already: its own run, taken over', { lock: 'this-run', counted: true, runningOthers: 2 }, 'admit'],
    ['another run holds the job', { lock: 'another-run', counted: false, runningOthers: 0 }, 'stale'],
    ['the lock lapsed', { lock: 'none', counted: true, runningOthers: 0 }, 'stale'],
  ])('%s → %s', (_name, snapshot, action) => {
    const d = evaluateKeyAdmission(snapshot, config, NOW);
    expect(d.action).toBe(action);
    expect(d.reason).toBeTruthy();
  });

  it('parks until the backstop, to the millisecond', () => {
    const d = evaluateKeyAdmission({ lock: 'this-run', counted: false, runningOthers: 2 }, config, NOW);
    expect(d).toEqual({ action: 'park', retryAt: NOW + 30_000, reason: 'key at its limit (2 of 2 running)' });
  });

  it.each([
    [0, 1, true],
    [1, 1, false],
    [1, 2, true],
    [2, 2, false],
  ])('hasKeyRoom(%i running, max %i) = %s', (running, max, room) => {
    expect(hasKeyRoom(running, max)).toBe(room);
  });
});
