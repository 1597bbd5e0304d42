import { describe, expect, it } from 'vitest';
import type { TransitionResult } from '@lanes/queue';
import { decideStart, type StartDecision, type StartSnapshot } from '../src/decide-start.js';

const made = (over: Partial<Extract<TransitionResult, { ok: true }>> = {}): TransitionResult => ({
  ok: true,
  state: 'running',
  takeover: false,
  crashSuspects: 0,
  infraRetries: 0,
  cancelRequested: false,
  reclaimed: false,
  ...over,
});

describe('decideStart', () => {
  it.each<[string, Omit<StartSnapshot, 'crashedRunsBudget'>, StartDecision]>([
    ['refused, the card done: never run a finished card again', { moved: { ok: false, refusal: 'illegal', state: 'done' } }, { kind: 'finished', state: 'done' }],
    ['refused, the card cancelled', { moved: { ok: false, refusal: 'illegal', state: 'cancelled' } }, { kind: 'finished', state: 'cancelled' }],
    [
      'refused as stale: another run holds it',
      { moved: { ok: false, refusal: 'stale', state: 'running' } },
      { kind: 'discard', reason: 'the card would not move to running (stale, running)' },
    ],
    ['refused with no record', { moved: { ok: false, refusal: 'not-found' } }, { kind: 'discard', reason: 'the card would not move to running (not-found, no record)' }],
    [
      'refused, the card terminal, while fenced: still finished',
      { moved: { ok: false, refusal: 'illegal', state: 'failed' }, fenced: 'lock lost' },
      { kind: 'finished', state: 'failed' },
    ],
    ['made, but fenced while in flight', { moved: made({ cancelRequested: true }), fenced: 'lock lost' }, { kind: 'discard', reason: 'lock lost' }],
    [
      'made, a cancel asked for meanwhile: nothing starts',
      { moved: made({ cancelRequested: true }) },
      { kind: 'end', outcome: { kind: 'stopped', reason: 'cancel', step: 'start' } },
    ],
    [
      'a takeover past the crash budget fails the card',
      { moved: made({ takeover: true, crashSuspects: 6 }) },
      { kind: 'end', outcome: { kind: 'crash-budget-spent', reason: '6 runs of this card vanished with their worker (budget 5)' } },
    ],
    ['a takeover within the budget runs', { moved: made({ takeover: true, crashSuspects: 5 }) }, { kind: 'run', reason: 'a takeover within the crash budget' }],
    ['made: the commands start', { moved: made() }, { kind: 'run', reason: 'moved to running' }],
  ])('%s', (_name, snapshot, decision) => {
    expect(decideStart({ ...snapshot, crashedRunsBudget: 5 })).toEqual(decision);
  });
});
