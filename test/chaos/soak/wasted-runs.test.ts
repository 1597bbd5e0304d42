import { describe, expect, it } from 'vitest';
import type { CardRecord } from '@lanes/contracts';
import type { InjectedFault } from './faults.js';
import { runsOf, type LedgerRecord } from './ledger.js';
import type { WorkerLife } from './reconcile.js';
import { wastedRuns, type WastedRunContext } from './wasted-runs.js';

const T = 1_800_000_000_000;
const W = 'host-1-aaaa';
const worker = (over: Partial<WorkerLife> = {}): WorkerLife => ({ label: 'worker-0.0', workerId: W, startedAtMs: T - 60_000, partitions: [], killed: false, ...over });
const run = (r: string, sandbox: string, startAt: number, endAt?: number): LedgerRecord[] => {
  const id = { card: 'c1', run: r, attempt: 1, sandbox, pid: 7 };
  return [{ type: 'start', ...id, at: startAt, workMs: 1_000 }, ...(endAt === undefined ? [] : [{ type: 'end' as const, ...id, at: endAt, outcome: 'ok' }])];
};
/** The card ran in sb-a (cut short or lost), then in sb-b, and its done names sb-b. */
const card = (state: CardRecord['state'] = 'done'): CardRecord => ({
  id: 'c1',
  lane: 'soak',
  title: 't',
  priority: 0,
  state,
  attempts: 1,
  infraRetries: 0,
  createdAt: '',
  updatedAt: '',
  history: [
    { at: new Date(T - 10_000).toISOString(), state: 'queued', attempt: 0 },
    { at: new Date(T - 9_000).toISOString(), state: 'running', attempt: 1, sandboxId: 'sb-a', message: `slot ${W}-soak-0` },
    { at: new Date(T - 3_000).toISOString(), state: 'running', attempt: 1, sandboxId: 'sb-b', message: `slot other-soak-0` },
    ...(state === 'done' ? [{ at: new Date(T).toISOString(), state: 'done' as const, attempt: 1, sandboxId: 'sb-b' }] : [{ at: new Date(T).toISOString(), state, attempt: 1 }]),
  ],
});
const ctx = (ledger: LedgerRecord[], over: Partial<WastedRunContext> = {}): WastedRunContext => ({
  cards: new Map([['c1', card()]]),
  runs: runsOf(ledger),
  workers: [worker()],
  sandboxKills: [],
  injected: [],
  acceptedCancels: new Set(),
  commitWindowMs: 4_000,
  ...over,
});
const both = [...run('a', 'sb-a', T - 9_000, T - 5_000), ...run('b', 'sb-b', T - 3_000, T - 500)];
const outage: InjectedFault = { kind: 'redis-kill', atMs: T - 5_200, endMs: T - 3_500 };

describe('wastedRuns: finished agent runs no card move recorded', () => {
  it('one finished run, committed: nothing discarded', () => {
    const w = wastedRuns(ctx(run('b', 'sb-b', T - 3_000, T - 500)));
    expect(w).toEqual({ finished: 1, runsPerDoneCard: 1, discarded: [] });
  });

  it('a run killed before its end is not a finished run', () => {
    expect(wastedRuns(ctx([...run('a', 'sb-a', T - 9_000), ...run('b', 'sb-b', T - 3_000, T - 500)])).discarded).toEqual([]);
  });

  it.each<[string, Partial<WastedRunContext>, string | undefined]>([
    ['nothing the soak did explains it', {}, undefined],
    ['its worker was killed within the commit window', { workers: [worker({ killed: true, endedAtMs: T - 4_000 })] }, 'was killed before it could commit'],
    ['its worker was killed long after (it had time to commit)', { workers: [worker({ killed: true, endedAtMs: T + 60_000 })] }, undefined],
    ['its worker was cut off when it finished', { workers: [worker({ partitions: [[T - 5_500, T - 2_000]] })] }, 'was cut off when it finished'],
    ['Redis was away when it finished', { injected: [outage] }, 'Redis was away'],
    ['its sandbox was killed right after the agent ended', { sandboxKills: [{ atMs: T - 4_900, sandboxId: 'sb-a', cardId: 'c1', pid: 1 }] }, 'its sandbox was killed'],
    ['a cancel was accepted for the card', { acceptedCancels: new Set(['c1']) }, 'a cancel was accepted'],
  ])('the first of two finished runs is discarded; %s', (_name, over, why) => {
    const w = wastedRuns(ctx(both, over));
    expect(w.finished).toBe(2);
    expect(w.runsPerDoneCard).toBe(2);
    expect(w.discarded).toHaveLength(1);
    expect(w.discarded[0]).toMatchObject({ card: 'c1', run: 'a', sandbox: 'sb-a' });
    if (why === undefined) {
      expect(w.discarded[0]!.explained).toBeUndefined();
      // What lanes did with the card, for the post-mortem of a CI run that keeps no logs.
      expect(w.discarded[0]!.trail).toBe(`queued → running sb-a (slot ${W}-soak-0) → running sb-b (slot other-soak-0) → done sb-b`);
    } else {
      expect(w.discarded[0]!.explained).toContain(why);
      expect(w.discarded[0]!.trail).toBeUndefined();
    }
  });

  it.each<[string, string | undefined, string | undefined]>([
    ['superseded, not yet started', 'superseded by c2', 'its card was superseded by c2'],
    ['superseded while it ran (cancel-running)', 'cancelled during agent: superseded by c2', 'its card was superseded by c2'],
    ['cancelled with no cancel of the soak and no supersede', 'cancelled during agent', undefined],
  ])('a finished run of a card that ended cancelled, %s', (_name, message, why) => {
    const cancelled = card('cancelled');
    cancelled.history.at(-1)!.message = message;
    const w = wastedRuns(ctx(run('b', 'sb-b', T - 3_000, T - 500), { cards: new Map([['c1', cancelled]]) }));
    expect(w.discarded).toHaveLength(1);
    if (why === undefined) expect(w.discarded[0]!.explained).toBeUndefined();
    else expect(w.discarded[0]!.explained).toContain(why);
  });

  it('every finished run of a card that did not end done is discarded', () => {
    const w = wastedRuns(ctx(both, { cards: new Map([['c1', card('cancelled')]]), acceptedCancels: new Set(['c1']) }));
    expect(w.discarded.map((d) => d.run).sort()).toEqual(['a', 'b']);
    expect(w.runsPerDoneCard).toBe(0);
  });
});
