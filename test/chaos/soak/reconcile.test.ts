import { describe, expect, it } from 'vitest';
import type { CardRecord } from '@lanes/contracts';
import { resolveCounts, parseSoakArgs } from './args.js';
import { concurrentCards, type LedgerRecord } from './ledger.js';
import { reconcile, type ReconcileInput, type WorkerLife } from './reconcile.js';
import { planSoak } from './schedule.js';
import { disagrees, type QueueEnd } from './queue-view.js';

const T = 1_800_000_000_000;
const id = (run: string, sandbox: string) => ({ card: 'c1', run, attempt: 1, sandbox, pid: 7 });
const start = (run: string, sandbox: string, at: number): LedgerRecord => ({ type: 'start', ...id(run, sandbox), at, workMs: 1_000 });
const end = (run: string, sandbox: string, at: number): LedgerRecord => ({ type: 'end', ...id(run, sandbox), at, outcome: 'ok' });
const met = (run: string, other: string): LedgerRecord => ({ type: 'concurrent', ...id(run, 'sb-b'), at: T, phase: 'start', other: { run: other, sandbox: 'sb-a' } });

describe('concurrentCards', () => {
  it.each<[string, LedgerRecord[], boolean]>([
    ['one run', [start('a', 'sb-a', T), end('a', 'sb-a', T + 1_000)], false],
    ['back to back', [start('a', 'sb-a', T), end('a', 'sb-a', T + 1_000), start('b', 'sb-b', T + 1_000), end('b', 'sb-b', T + 2_000)], false],
    ['overlap by 1 ms', [start('a', 'sb-a', T), end('a', 'sb-a', T + 1_000), start('b', 'sb-b', T + 999), end('b', 'sb-b', T + 2_000)], true],
    // A SIGKILLed run has no end: its length is unknown, so intervals alone never call it concurrent…
    ['killed, then rerun', [start('a', 'sb-a', T), start('b', 'sb-b', T + 500), end('b', 'sb-b', T + 2_000)], false],
    // …but a run that met it alive proves it.
    ['killed, but met alive', [start('a', 'sb-a', T), start('b', 'sb-b', T + 500), met('b', 'a'), end('b', 'sb-b', T + 2_000)], true],
  ])('%s', (_, records, concurrent) => {
    expect(concurrentCards(records).has('c1')).toBe(concurrent);
  });
});

const card = (states: CardRecord['state'][]): CardRecord => ({
  id: 'c1',
  lane: 'soak',
  title: 't',
  priority: 0,
  state: states.at(-1)!,
  attempts: 1,
  infraRetries: 0,
  createdAt: '',
  updatedAt: '',
  history: states.map((state) => ({ at: new Date(T).toISOString(), state, attempt: 1 })),
});

function input(over: Partial<ReconcileInput>): ReconcileInput {
  return {
    cardIds: ['c1'],
    enqueued: new Set(['c1']),
    cards: new Map([['c1', card(['queued', 'running', 'done'])]]),
    ledger: [],
    logs: { workerIds: new Map(), reaps: [], forgotten: [], deadSandboxes: new Set() },
    workers: [],
    sandboxKills: [],
    injected: [],
    partitionGraceMs: 4_000,
    unexpectedExits: [],
    ...over,
  };
}

describe('reconcile: cards', () => {
  it.each<[string, CardRecord['state'][], { lost: number; terminalTwice: number; leftTerminal: number }]>([
    ['done once', ['queued', 'running', 'done'], { lost: 0, terminalTwice: 0, leftTerminal: 0 }],
    ['done twice', ['queued', 'running', 'running', 'done', 'done'], { lost: 0, terminalTwice: 1, leftTerminal: 0 }],
    ['done, then blocked for good', ['queued', 'running', 'done', 'blocked'], { lost: 1, terminalTwice: 0, leftTerminal: 1 }],
    ['still running', ['queued', 'running'], { lost: 1, terminalTwice: 0, leftTerminal: 0 }],
  ])('%s', (_, states, want) => {
    const r = reconcile(input({ cards: new Map([['c1', card(states)]]) }));
    expect({ lost: r.lost, terminalTwice: r.terminalTwice, leftTerminal: r.leftTerminal }).toEqual(want);
  });

  it('counts a card the API never answered for as lost', () => {
    expect(reconcile(input({ cards: new Map([['c1', undefined]]) })).lost).toBe(1);
  });
});

describe('reconcile: reaps, judged by what the soak knows of the owner', () => {
  const worker: WorkerLife = { label: 'worker-0.0', workerId: 'host-42-abcd1234', startedAtMs: T, endedAtMs: T + 10_000, partitions: [[T + 2_000, T + 4_000]], killed: true };
  const reapAt = (atMs: number) =>
    input({ workers: [worker], logs: { workerIds: new Map(), reaps: [{ atMs, sandboxId: 'sb', slot: 'host-42-abcd1234-soak-0' }], forgotten: [], deadSandboxes: new Set() } });
  it.each<[string, number, 'falseReaps' | 'reapsOfPartitioned' | 'reapsOfDeadOwners']>([
    ['alive, connected', T + 1_000, 'falseReaps'],
    ['inside the partition', T + 3_000, 'reapsOfPartitioned'],
    ['within the grace after it', T + 8_000, 'reapsOfPartitioned'],
    ['1 ms past the grace', T + 8_001, 'falseReaps'],
    ['1 ms before the owner ended', T + 9_999, 'falseReaps'],
    ['once the owner ended', T + 10_000, 'reapsOfDeadOwners'],
  ])('%s', (_, atMs, bucket) => {
    const r = reconcile(reapAt(atMs));
    expect({ falseReaps: r.falseReaps, reapsOfPartitioned: r.reapsOfPartitioned, reapsOfDeadOwners: r.reapsOfDeadOwners }).toEqual({
      falseReaps: 0,
      reapsOfPartitioned: 0,
      reapsOfDeadOwners: 0,
      [bucket]: 1,
    });
  });
});

describe('planSoak', () => {
  const args = parseSoakArgs(['--cards', '60', '--minutes', '1', '--seed', '11']);
  it('is the same plan for the same seed, and another for another seed', () => {
    const counts = resolveCounts(args);
    expect(planSoak(args, counts)).toEqual(planSoak(args, counts));
    expect(planSoak({ ...args, seed: 12 }, counts).faults).not.toEqual(planSoak(args, counts).faults);
  });
  it('has at least one of every fault, inside the run', () => {
    const plan = planSoak(args, resolveCounts(args));
    const kinds = new Set(plan.faults.map((f) => f.kind));
    expect([...kinds].sort()).toEqual(['cancel', 'create-failures', 'partition', 'redis-kill', 'sandbox-kill', 'worker-drain', 'worker-kill']);
    expect(plan.faults.every((f) => f.atMs > 0 && f.atMs < plan.runMs)).toBe(true);
  });
});

describe('disagrees (board vs queue)', () => {
  it.each<[string | undefined, QueueEnd | undefined, boolean]>([
    ['done', 'completed', false],
    ['done', 'failed', true],
    ['done', 'none', true],
    ['failed', 'failed', false],
    ['failed', 'completed', true],
    ['running', 'none', false],
    ['blocked', 'completed', true],
    ['queued', 'failed', true],
    ['cancelled', 'failed', false],
    ['cancelled', 'completed', false],
    ['done', undefined, false],
  ])('board %s, queue %s → %s', (board, queue, want) => {
    expect(disagrees(board, queue)).toBe(want);
  });
});

describe('reconcile: cancels', () => {
  it('counts the cancels the API accepted once per card, and names the accepted ones that did not end cancelled', () => {
    const cards = new Map([
      ['c1', card(['queued', 'running', 'cancelled'])],
      ['c2', card(['queued', 'running', 'done'])],
      ['c3', card(['queued', 'running', 'done'])],
    ]);
    const r = reconcile(
      input({
        cardIds: ['c1', 'c2', 'c3'],
        cards,
        cancels: [
          { cardId: 'c1', status: 202 },
          { cardId: 'c1', status: 409 },
          { cardId: 'c2', status: 202 },
          { cardId: 'c3', status: 409 },
        ],
      }),
    );
    expect(r.cancels).toEqual({ accepted: 2, endedCancelled: 1 });
    expect(r.examples.acceptedCancelNotCancelled).toEqual(['c2: done']);
    expect(r.failures).toEqual([]);
    expect(reconcile(input({})).cancels).toEqual({ accepted: 0, endedCancelled: 0 });
  });
});
