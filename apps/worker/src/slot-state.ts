import { IllegalStateError, type ObservedExitCode } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';

/**
 * starting → live → dead → respawning → live …; waiting-provider while the breaker holds creates back.
 * A planned renewal is no death: live → starting (recycled: a fresh sandbox is made at once) or
 * live → released (idle with no sandbox until the next card asks for one).
 */
export type SlotStateName = 'starting' | 'live' | 'dead' | 'respawning' | 'waiting-provider' | 'released' | 'stopped';

/** The sandbox a slot lost, remembered until a replacement is live (for status and its record). */
export interface DeadSandbox {
  sandboxId?: string;
  observedExitCode: ObservedExitCode;
}

/** Where the slot's sandbox is. Only `live` has a handle to run on; `stopped` may still hold one to terminate. */
export type SandboxPhase =
  | { state: 'starting' }
  | { state: 'waiting-provider'; dead?: DeadSandbox }
  | { state: 'respawning'; dead?: DeadSandbox }
  | { state: 'live'; handle: SandboxHandle }
  | { state: 'dead'; dead: DeadSandbox }
  | { state: 'released' }
  | { state: 'stopped'; handle?: SandboxHandle };

/** A slot's whole state: its sandbox, and the card it holds (independent: a card may wait for a respawn). */
export interface SlotSnapshot {
  sandbox: SandboxPhase;
  cardId?: string;
}

export type SlotEvent =
  | { type: 'spawn'; respawn: boolean }
  | { type: 'wait-provider' }
  | { type: 'live'; handle: SandboxHandle }
  | { type: 'dead'; observedExitCode: ObservedExitCode }
  /** The live sandbox is replaced (recycle) or let go (release-sandbox) on purpose: no death. */
  | { type: 'recycle' }
  | { type: 'release-sandbox' }
  | { type: 'halt' }
  | { type: 'terminated' }
  | { type: 'take'; cardId: string }
  | { type: 'release' };

export const INITIAL_SLOT_STATE: SlotSnapshot = { sandbox: { state: 'starting' } };

function deadOf(p: SandboxPhase): DeadSandbox | undefined {
  return p.state === 'dead' || p.state === 'respawning' || p.state === 'waiting-provider' ? p.dead : undefined;
}

function illegal(s: SlotSnapshot, e: SlotEvent): never {
  throw new IllegalStateError(`slot event ${e.type} is not allowed while the sandbox is ${s.sandbox.state}${s.cardId ? ` holding ${s.cardId}` : ''}`);
}

/** The slot's one transition function: the next state, or IllegalStateError for an event the state does not allow. */
export function nextSlotState(s: SlotSnapshot, e: SlotEvent): SlotSnapshot {
  const p = s.sandbox;
  const withSandbox = (sandbox: SandboxPhase): SlotSnapshot => ({ ...s, sandbox });
  switch (e.type) {
    case 'take':
      if (s.cardId !== undefined) return illegal(s, e);
      return { ...s, cardId: e.cardId };
    case 'release': {
      if (s.cardId === undefined) return illegal(s, e);
      const { cardId: _held, ...rest } = s;
      return rest;
    }
    case 'spawn': {
      if (p.state === 'live' || p.state === 'stopped') return illegal(s, e);
      const dead = deadOf(p);
      return withSandbox(e.respawn ? { state: 'respawning', ...(dead ? { dead } : {}) } : { state: 'starting' });
    }
    case 'wait-provider': {
      if (p.state === 'live' || p.state === 'stopped') return illegal(s, e);
      const dead = deadOf(p);
      return withSandbox({ state: 'waiting-provider', ...(dead ? { dead } : {}) });
    }
    case 'live':
      if (p.state !== 'starting' && p.state !== 'respawning') return illegal(s, e);
      return withSandbox({ state: 'live', handle: e.handle });
    case 'dead':
      if (p.state !== 'live') return illegal(s, e);
      return withSandbox({ state: 'dead', dead: { sandboxId: p.handle.id, observedExitCode: e.observedExitCode } });
    case 'recycle':
      if (p.state !== 'live') return illegal(s, e);
      return withSandbox({ state: 'starting' });
    case 'release-sandbox':
      if (p.state !== 'live' || s.cardId !== undefined) return illegal(s, e);
      return withSandbox({ state: 'released' });
    case 'halt':
      if (p.state === 'stopped') return s;
      return withSandbox(p.state === 'live' ? { state: 'stopped', handle: p.handle } : { state: 'stopped' });
    case 'terminated':
      if (p.state !== 'stopped') return illegal(s, e);
      return withSandbox({ state: 'stopped' });
  }
}
