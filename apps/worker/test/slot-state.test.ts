import { describe, expect, it } from 'vitest';
import { IllegalStateError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import { nextSlotState, type SandboxPhase, type SlotEvent, type SlotSnapshot } from '../src/slot-state.js';

/** Only the id is read by the transition function. */
const handle = (id: string) => ({ id }) as unknown as SandboxHandle;
const h1 = handle('sb-1');
const h2 = handle('sb-2');
const dead = { sandboxId: 'sb-1', observedExitCode: 137 as const };
const at = (sandbox: SandboxPhase, cardId?: string): SlotSnapshot => ({ sandbox, ...(cardId ? { cardId } : {}) });

describe('nextSlotState', () => {
  it.each<[string, SlotSnapshot, SlotEvent, SlotSnapshot]>([
    ['starting, spawn', at({ state: 'starting' }), { type: 'spawn', respawn: false }, at({ state: 'starting' })],
    ['starting, live', at({ state: 'starting' }), { type: 'live', handle: h1 }, at({ state: 'live', handle: h1 })],
    ['starting, breaker holds creates', at({ state: 'starting' }), { type: 'wait-provider' }, at({ state: 'waiting-provider' })],
    ['live, dead keeps the sandbox id and exit code', at({ state: 'live', handle: h1 }, 'c'), { type: 'dead', observedExitCode: 137 }, at({ state: 'dead', dead }, 'c')],
    ['dead, respawn remembers the dead one', at({ state: 'dead', dead }), { type: 'spawn', respawn: true }, at({ state: 'respawning', dead })],
    ['dead, breaker holds creates', at({ state: 'dead', dead }), { type: 'wait-provider' }, at({ state: 'waiting-provider', dead })],
    ['waiting-provider, respawn', at({ state: 'waiting-provider', dead }), { type: 'spawn', respawn: true }, at({ state: 'respawning', dead })],
    ['respawning, live forgets the dead one', at({ state: 'respawning', dead }), { type: 'live', handle: h2 }, at({ state: 'live', handle: h2 })],
    ['live, halt keeps the handle to terminate', at({ state: 'live', handle: h1 }), { type: 'halt' }, at({ state: 'stopped', handle: h1 })],
    ['respawning, halt', at({ state: 'respawning', dead }), { type: 'halt' }, at({ state: 'stopped' })],
    ['stopped, halt again', at({ state: 'stopped', handle: h1 }), { type: 'halt' }, at({ state: 'stopped', handle: h1 })],
    ['stopped, terminated', at({ state: 'stopped', handle: h1 }), { type: 'terminated' }, at({ state: 'stopped' })],
    ['free, take', at({ state: 'live', handle: h1 }), { type: 'take', cardId: 'c' }, at({ state: 'live', handle: h1 }, 'c')],
    ['a card may wait for a respawn', at({ state: 'respawning', dead }), { type: 'take', cardId: 'c' }, at({ state: 'respawning', dead }, 'c')],
    ['holding, release', at({ state: 'live', handle: h1 }, 'c'), { type: 'release' }, at({ state: 'live', handle: h1 })],
    ['stopped, release', at({ state: 'stopped' }, 'c'), { type: 'release' }, at({ state: 'stopped' })],
    ['live, recycle: a fresh sandbox, no dead one remembered', at({ state: 'live', handle: h1 }), { type: 'recycle' }, at({ state: 'starting' })],
    ['live holding a card, recycle before it starts', at({ state: 'live', handle: h1 }, 'c'), { type: 'recycle' }, at({ state: 'starting' }, 'c')],
    ['live and idle, release-sandbox', at({ state: 'live', handle: h1 }), { type: 'release-sandbox' }, at({ state: 'released' })],
    ['released, spawn for the next card', at({ state: 'released' }), { type: 'spawn', respawn: false }, at({ state: 'starting' })],
    ['released, a card waits for its sandbox', at({ state: 'released' }), { type: 'take', cardId: 'c' }, at({ state: 'released' }, 'c')],
    ['released, halt', at({ state: 'released' }), { type: 'halt' }, at({ state: 'stopped' })],
  ])('%s', (_name, from, event, to) => {
    expect(nextSlotState(from, event)).toEqual(to);
  });

  it.each<[string, SlotSnapshot, SlotEvent]>([
    ['take while holding a card', at({ state: 'live', handle: h1 }, 'c'), { type: 'take', cardId: 'd' }],
    ['release while free', at({ state: 'live', handle: h1 }), { type: 'release' }],
    ['spawn while live', at({ state: 'live', handle: h1 }), { type: 'spawn', respawn: false }],
    ['spawn once stopped', at({ state: 'stopped' }), { type: 'spawn', respawn: true }],
    ['live once stopped', at({ state: 'stopped' }), { type: 'live', handle: h2 }],
    ['live from dead without a spawn', at({ state: 'dead', dead }), { type: 'live', handle: h2 }],
    ['live while waiting for the provider', at({ state: 'waiting-provider' }), { type: 'live', handle: h2 }],
    ['dead without a live sandbox', at({ state: 'respawning', dead }), { type: 'dead', observedExitCode: 1 }],
    ['wait-provider while live', at({ state: 'live', handle: h1 }), { type: 'wait-provider' }],
    ['terminated before halt', at({ state: 'live', handle: h1 }), { type: 'terminated' }],
    ['recycle without a live sandbox', at({ state: 'respawning', dead }), { type: 'recycle' }],
    ['release-sandbox while a card holds the slot', at({ state: 'live', handle: h1 }, 'c'), { type: 'release-sandbox' }],
    ['release-sandbox once released', at({ state: 'released' }), { type: 'release-sandbox' }],
  ])('%s throws IllegalStateError', (_name, from, event) => {
    expect(() => nextSlotState(from, event)).toThrow(IllegalStateError);
  });
});
