import { describe, expect, it } from 'vitest';
import type { BreakerStateName, SandboxState, SlotStatus, WorkerLiveness } from '@lanes/contracts';
import { evaluateRedriveGate } from '@lanes/supervision';

const slot = (worker: string, state?: SandboxState): SlotStatus => ({ slot: '0', worker, ...(state ? { sandbox: { id: `sb-${worker}`, state } } : {}) });

describe('evaluateRedriveGate', () => {
  it.each<[string, BreakerStateName, SlotStatus[], Record<string, WorkerLiveness>, 'open' | 'hold']>([
    ['live sandbox of an alive worker', 'closed', [slot('w', 'live')], { w: 'alive' }, 'open'],
    ['live sandbox, worker unknown: hold', 'closed', [slot('w', 'live')], { w: 'unknown' }, 'hold'],
    ['live sandbox, worker has no verdict: hold', 'closed', [slot('w', 'live')], {}, 'hold'],
    ['live sandbox, worker gone', 'closed', [slot('w', 'live')], { w: 'gone' }, 'hold'],
    ['alive worker, sandbox creating', 'closed', [slot('w', 'creating')], { w: 'alive' }, 'hold'],
    ['alive worker, no sandbox', 'closed', [slot('w')], { w: 'alive' }, 'hold'],
    ['breaker open', 'open', [slot('w', 'live')], { w: 'alive' }, 'hold'],
    ['breaker half-open', 'half-open', [slot('w', 'live')], { w: 'alive' }, 'hold'],
    ['one good slot among bad ones', 'closed', [slot('a', 'live'), slot('b', 'dead'), slot('c', 'live')], { a: 'gone', b: 'alive', c: 'alive' }, 'open'],
    ['no slots', 'closed', [], {}, 'hold'],
  ])('%s → %s', (_what, breaker, slots, liveness, action) => {
    const d = evaluateRedriveGate({
      breaker,
      slots,
      liveness: Object.fromEntries(Object.entries(liveness).map(([worker, l]) => [worker, { worker, liveness: l, reason: 'r' }])),
    });
    expect(d.action).toBe(action);
    expect(d.reason).toBeTruthy();
  });
});
