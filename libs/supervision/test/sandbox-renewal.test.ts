import { describe, expect, it } from 'vitest';
import { evaluateSandboxRenewal, type SandboxRenewalSnapshot } from '@lanes/supervision';

const CONFIG = { recycleAfterMs: 10_000, lifetimeMs: 20_000, idleReleaseMs: 3_000 };
const card = (ageMs: number, cardTimeoutMs = 5_000): SandboxRenewalSnapshot => ({ moment: 'card-start', ageMs, cardTimeoutMs });
const idle = (ageMs: number, idleMs: number, mayRelease: boolean): SandboxRenewalSnapshot => ({ moment: 'idle', ageMs, idleMs, mayRelease });

describe('evaluateSandboxRenewal', () => {
  it.each<[string, SandboxRenewalSnapshot, 'keep' | 'recycle' | 'release']>([
    ['card start, young', card(0), 'keep'],
    ['card start, 1 ms before recycleAfter', card(9_999), 'keep'],
    ['card start, at recycleAfter', card(10_000), 'recycle'],
    ['card start, 1 ms past recycleAfter', card(10_001), 'recycle'],
    // lifetime 20 s, card 15 s: age 5 s leaves exactly 15 s (enough), 5,001 ms leaves 1 ms too little.
    ['card start, remaining lifetime exactly the card timeout', card(5_000, 15_000), 'keep'],
    ['card start, remaining lifetime 1 ms short of the card timeout', card(5_001, 15_000), 'recycle'],
    ['idle, may release, 1 ms before idleRelease', idle(0, 2_999, true), 'keep'],
    ['idle, may release, at idleRelease', idle(0, 3_000, true), 'release'],
    ['idle, kept for minSlots however long idle', idle(0, 1_000_000, false), 'keep'],
    ['idle, kept for minSlots, at recycleAfter', idle(10_000, 0, false), 'recycle'],
    ['idle, kept for minSlots, 1 ms before recycleAfter', idle(9_999, 0, false), 'keep'],
    ['idle, may release and old: released (nothing to replace it with yet)', idle(10_000, 3_000, true), 'release'],
    ['idle, may release, old but not idle long: recycled', idle(10_000, 10, true), 'recycle'],
  ])('%s', (_name, snapshot, action) => {
    const decision = evaluateSandboxRenewal(snapshot, CONFIG);
    expect(decision.action).toBe(action);
    expect(decision.reason).toBeTruthy();
  });
});
