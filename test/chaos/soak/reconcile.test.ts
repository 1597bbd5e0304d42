import { describe, expect, it } from 'vitest';
import type { CardRecord } from '@lanes/contracts';
import { resolveCounts, parseSoakArgs } from './args.js';
import { concurrentCards, type LedgerRecord } from './ledger.js';
import type { LogFacts, SandboxEnd } from './logs.js';
import type { FailoverRecord } from './failover.js';
import { reconcile, type FailoverInput, type ReconcileInput, type WorkerLife } from './reconcile.js';
import type { SandboxSighting } from './sandbox-watch.js';
import { planSoak } from './schedule.js';
import { disagrees, type QueueEnd } from './queue-view.js';

const T = 1_800_000_000_000;
const PROVIDER_FALSE_REAP = "1 sandbox(es) vanished on the provider's side with nothing to explain it (owner alive and connected: false reaps)";
const id = (run: string, sandbox: string) => ({ card: 'c1', run, attempt: 1, sandbox, pid: 7 });
const start = (run: string, sandbox: string, at: number): LedgerRecord => ({ type: 'start', ...id(run, sandbox), at, workMs: 1_000 });
const end = (run: string, sandbox: string, at: number, outcome = 'ok'): LedgerRecord => ({ type: 'end', ...id(run, sandbox), at, outcome });
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

const noLogs = (): LogFacts => ({ workerIds: new Map(), reaps: [], unnamedReaps: [], forgotten: [], deadSandboxes: new Set(), runEvents: [], sandboxEnds: [] });

/** A clean run of one card: done at T, after one run that ended ok a second before. */
function input(over: Partial<ReconcileInput>): ReconcileInput {
  return {
    cardIds: ['c1'],
    enqueued: new Set(['c1']),
    cards: new Map([['c1', card(['queued', 'running', 'done'])]]),
    ledger: [start('a', 'sb-a', T - 2_000), end('a', 'sb-a', T - 1_000)],
    logs: noLogs(),
    workers: [],
    sandboxKills: [],
    injected: [],
    partitionGraceMs: 4_000,
    unexpectedExits: [],
    intendedFailures: new Set(),
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
  const reapAt = (atMs: number) => input({ workers: [worker], logs: { ...noLogs(), reaps: [{ atMs, sandboxId: 'sb', slot: 'host-42-abcd1234-soak-0' }] } });
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
    expect(r.cancels).toEqual({ accepted: 2, endedCancelled: 1, finishedFirst: 0 });
    expect(r.examples.acceptedCancelNotCancelled).toEqual(['c2: done']);
    expect(r.failures).toContain('1 accepted cancel(s) whose card did not end cancelled');
    expect(reconcile(input({})).cancels).toEqual({ accepted: 0, endedCancelled: 0, finishedFirst: 0 });
  });
});

describe('the verdict', () => {
  const ids = Array.from({ length: 60 }, (_, i) => `c${i}`);
  const sixtyFailed = new Map(ids.map((id) => [id, { ...card(['queued', 'running', 'failed']), id }]));

  it('fails the issue 26 adversarial run on each thing wrong with it, and on nothing else', () => {
    // 60 cards, all failed, and an empty ledger; one stack process that exited by itself; the queue
    // says every job completed; one sandbox kill nobody noticed. The old verdict passed all of it.
    const r = reconcile(
      input({
        cardIds: ids,
        enqueued: new Set(ids),
        cards: sixtyFailed,
        ledger: [],
        unexpectedExits: ['supervisor'],
        queueEnds: new Map(ids.map((id) => [id, 'completed' as const])),
        sandboxKills: [{ atMs: T, sandboxId: 'sb-x', cardId: 'c0', pid: 9 }],
      }),
    );
    expect(r.failures).toEqual([
      '60 failed card(s) the schedule did not intend',
      '1 stack process(es) exited by themselves (supervisor)',
      '1 injected sandbox kill(s) never detected',
      '60 card(s) whose board state and queue disagree',
    ]);
  });

  it('fails a run whose only flaw is a sandbox that vanished under a live, connected owner, though lanes logged no reap of it', () => {
    // A fabricated vanish: the provider showed sb-x alive, then its record gone; the logs say
    // nothing about it (no reap, no recycle), its owner ran all along and was never cut off.
    const owner: WorkerLife = { label: 'worker-1.0', workerId: 'host-7-0123abcd', startedAtMs: T - 60_000, partitions: [[T - 50_000, T - 44_000]], killed: false };
    const r = reconcile(
      input({
        queueEnds: new Map([['c1', 'completed']]),
        workers: [owner],
        sandboxSightings: [
          { sandboxId: 'sb-ok', worker: owner.workerId!, firstSeenAtMs: T - 60_000, lastSeenAtMs: T },
          {
            sandboxId: 'sb-x',
            worker: owner.workerId!,
            slot: `${owner.workerId}-soak-1`,
            firstSeenAtMs: T - 30_000,
            lastSeenAtMs: T - 20_500,
            goneAtMs: T - 20_000,
            gone: 'record-removed',
          },
        ] satisfies SandboxSighting[],
      }),
    );
    expect(r.falseReaps).toBe(0);
    expect(r.providerVanishes).toEqual({ seen: 2, total: 1, bySoak: 0, byOwner: 0, ownerGone: 0, unexplained: 1 });
    expect(r.failures).toEqual([PROVIDER_FALSE_REAP]);
    expect(r.examples.providerFalseReaps).toEqual([
      `sb-x: owner worker-1.0 alive and connected; last seen alive at ${new Date(T - 20_500).toISOString()}, gone at ${new Date(T - 20_000).toISOString()} (record-removed)`,
    ]);
  });

  it('passes a clean run', () => {
    const r = reconcile(input({ queueEnds: new Map([['c1', 'completed']]) }));
    expect(r.failures).toEqual([]);
  });

  const worker: WorkerLife = { label: 'worker-0.0', workerId: 'host-42-abcd1234', startedAtMs: T - 10_000, partitions: [], killed: false };
  const killed: WorkerLife = { ...worker, endedAtMs: T - 5_000, killed: true };
  const reap = { atMs: T - 1_500, sandboxId: 'sb-a', slot: 'host-42-abcd1234-soak-0' };
  const kill = { atMs: T - 1_500, sandboxId: 'sb-a', cardId: 'c1', pid: 9 };
  const vanished: SandboxSighting = {
    sandboxId: 'sb-v',
    worker: worker.workerId!,
    slot: reap.slot,
    firstSeenAtMs: T - 9_000,
    lastSeenAtMs: T - 1_500,
    goneAtMs: T - 1_000,
    gone: 'record-removed',
  };
  const recycled: SandboxEnd = { atMs: T - 1_400, label: worker.label, sandboxId: 'sb-v', event: 'sandbox.recycled', reason: 'older than sandboxRecycleAfterMs' };
  // Each gate on its own: the clean run with one thing changed fails with that gate's message only
  // (or passes, where the change is one the gate must allow).
  it.each<[string, Partial<ReconcileInput>, string[]]>([
    [
      'a card not terminal',
      { cards: new Map([['c1', card(['queued', 'running'])]]) },
      ['1 lost card(s)', "1 finished agent run(s) discarded with no fault of the soak's to explain it"],
    ],
    [
      'two finished runs that overlap',
      { ledger: [start('a', 'sb-a', T - 3_000), start('b', 'sb-b', T - 2_000), end('a', 'sb-a', T - 1_999), end('b', 'sb-b', T - 1_000)] },
      ['1 card(s) ran concurrently', "1 finished agent run(s) discarded with no fault of the soak's to explain it"],
    ],
    ['done twice', { cards: new Map([['c1', card(['queued', 'running', 'done', 'done'])]]) }, ['1 card(s) terminal twice in history']],
    ['a reap of a live, connected owner', { workers: [worker], logs: { ...noLogs(), reaps: [reap] } }, ['1 false reap(s)']],
    [
      'a failed card',
      { cards: new Map([['c1', card(['queued', 'running', 'failed'])]]) },
      ['1 failed card(s) the schedule did not intend', "1 finished agent run(s) discarded with no fault of the soak's to explain it"],
    ],
    ['a failed card the schedule meant to fail', { cards: new Map([['c1', card(['queued', 'running', 'failed'])]]), intendedFailures: new Set(['c1']) }, []],
    ['done, with an empty ledger', { ledger: [] }, ['1 done card(s) with no finished run in the ledger']],
    [
      'done, its only run interrupted',
      { ledger: [start('a', 'sb-a', T - 2_000), end('a', 'sb-a', T - 1_000, 'interrupted')] },
      ['1 done card(s) with no finished run in the ledger'],
    ],
    ['a run started 1 ms after done', { ledger: [...input({}).ledger, start('z', 'sb-z', T + 1)] }, ['1 run(s) started after their card was terminal']],
    ['a run started as the card went done', { ledger: [...input({}).ledger, start('z', 'sb-z', T)] }, []],
    ['a stack process that exited by itself', { unexpectedExits: ['api'] }, ['1 stack process(es) exited by themselves (api)']],
    ['a sandbox kill nobody noticed', { sandboxKills: [kill] }, ['1 injected sandbox kill(s) never detected']],
    ['a sandbox kill a worker declared dead', { sandboxKills: [kill], logs: { ...noLogs(), deadSandboxes: new Set(['sb-a']) } }, []],
    ['a worker kill nobody noticed', { workers: [killed] }, ['1 injected worker kill(s) never detected']],
    ['a worker kill the supervisor forgot the worker for', { workers: [killed], logs: { ...noLogs(), forgotten: [{ atMs: T - 4_000, worker: killed.workerId! }] } }, []],
    [
      'an accepted cancel, and the card done by a run that ended after the answer',
      { cancels: [{ cardId: 'c1', status: 202, answeredAtMs: T - 1_001 }] },
      ['1 accepted cancel(s) whose card did not end cancelled'],
    ],
    ['an accepted cancel answered once the run had ended ok', { cancels: [{ cardId: 'c1', status: 202, answeredAtMs: T - 1_000 }] }, []],
    [
      'an accepted cancel, the card failed',
      { cards: new Map([['c1', card(['queued', 'running', 'failed'])]]), intendedFailures: new Set(['c1']), cancels: [{ cardId: 'c1', status: 202, answeredAtMs: T }] },
      ['1 accepted cancel(s) whose card did not end cancelled'],
    ],
    ['a cancel answered 409', { cancels: [{ cardId: 'c1', status: 409, answeredAtMs: T - 1_001 }] }, []],
    ['board done, queue failed', { queueEnds: new Map([['c1', 'failed']]) }, ['1 card(s) whose board state and queue disagree']],
    [
      'done, and a second finished run nothing explains',
      { ledger: [start('x', 'sb-x', T - 5_000), end('x', 'sb-x', T - 4_000), ...input({}).ledger] },
      ["1 finished agent run(s) discarded with no fault of the soak's to explain it"],
    ],
    [
      'done, and a second finished run whose worker was killed before it could commit',
      {
        ledger: [start('x', 'sb-x', T - 5_000), end('x', 'sb-x', T - 4_000), ...input({}).ledger],
        cards: new Map([
          [
            'c1',
            {
              ...card(['queued', 'running', 'done']),
              history: [
                ...card(['queued']).history,
                { at: new Date(T - 5_000).toISOString(), state: 'running', attempt: 1, sandboxId: 'sb-x', message: 'slot host-42-abcd1234-soak-0' },
                { at: new Date(T).toISOString(), state: 'done', attempt: 1, sandboxId: 'sb-a' },
              ],
            },
          ],
        ]),
        workers: [{ ...killed, endedAtMs: T - 3_900 }],
        logs: { ...noLogs(), forgotten: [{ atMs: T - 1_000, worker: killed.workerId! }] },
      },
      [],
    ],
    // Judged from the provider's side: no reap was logged, the watcher saw the sandbox gone.
    ['a sandbox of a live, connected owner that vanished, no reap logged', { workers: [worker], sandboxSightings: [vanished] }, [PROVIDER_FALSE_REAP]],
    ['the same vanish, its owner having recycled it', { workers: [worker], sandboxSightings: [vanished], logs: { ...noLogs(), sandboxEnds: [recycled] } }, []],
    [
      'the same vanish, its owner having been killed',
      { workers: [{ ...killed, endedAtMs: T - 1_000 }], sandboxSightings: [vanished], logs: { ...noLogs(), forgotten: [{ atMs: T - 900, worker: killed.workerId! }] } },
      [],
    ],
    ['a reap whose owner the soak cannot name', { logs: { ...noLogs(), reaps: [{ ...reap, slot: 'elsewhere-soak-0' }] } }, ['1 reap(s) the soak could not judge']],
    ['a reap that names no sandbox', { logs: { ...noLogs(), unnamedReaps: [{ atMs: T - 1_500, reason: 'orphan' }] } }, ['1 reap(s) the soak could not judge']],
  ])('%s', (_, over, failures) => {
    expect(reconcile(input(over)).failures).toEqual(failures);
  });
});

describe('reconcile: failovers', () => {
  const kill = T - 40_000;
  const promoted = kill + 11_000;
  const lockMs = 4_000;
  const record = (over: Partial<FailoverRecord> = {}): FailoverRecord => ({
    atMs: kill,
    promotedAtMs: promoted,
    endMs: promoted + 2_000,
    oldPrimary: 'redis-a :1',
    newPrimary: 'redis-b :2',
    lagBytesBeforeKill: 0,
    lostBytes: 0,
    cardsRead: 1,
    vanished: [],
    movesLost: [],
    reposted: [],
    repostAccepted: true,
    oldPrimaryRejoined: true,
    ...over,
  });
  const failover = (records: FailoverRecord[], over: Partial<FailoverInput> = {}): FailoverInput => ({ planned: 1, records, redisKillsFailedOver: 0, lockMs, ...over });
  /** Run a started before `from` (before the kill, unless `from` is) and run b, overlapping from `from` to `to`; the card done after b. */
  const overlapping = (from: number, to: number): LedgerRecord[] => [
    start('a', 'sb-a', Math.min(kill, from) - 1_000),
    start('b', 'sb-b', from),
    end('a', 'sb-a', to),
    end('b', 'sb-b', T - 1_000),
  ];

  it('a run concurrent with another only inside the window the README admits (kill to promotion + 2 locks) is counted, not gated', () => {
    const r = reconcile(input({ ledger: overlapping(promoted + 1_000, promoted + 2 * lockMs), failover: failover([record()]) }));
    expect(r.ranConcurrently).toBe(0);
    expect(r.failover.concurrentAdmitted).toBe(1);
    expect(r.examples.concurrentAdmitted).toEqual(['c1: runs a and b overlap by 7000 ms']);
    expect(r.examples.discardedRuns).toEqual(['c1: run a in sb-a: it ran across the failover and its card was taken over on the new primary (its lock or move not replicated)']);
    expect(r.failures).toEqual([]);
  });

  it("an overlap that goes on past that window is gated, and so is the first run's outcome, discarded", () => {
    const r = reconcile(input({ ledger: overlapping(promoted + 1_000, promoted + 2 * lockMs + 1), failover: failover([record()]) }));
    expect(r.ranConcurrently).toBe(1);
    expect(r.failover.concurrentAdmitted).toBe(0);
    expect(r.failures).toEqual(['1 card(s) ran concurrently', "1 finished agent run(s) discarded with no fault of the soak's to explain it"]);
  });

  it('an overlap before the kill is gated, and so is any overlap without a failover', () => {
    expect(reconcile(input({ ledger: overlapping(kill - 2_000, kill - 1_000), failover: failover([record()]) })).failures).toEqual(['1 card(s) ran concurrently']);
    // Without a failover the first run's outcome, discarded, has nothing to explain it either.
    expect(reconcile(input({ ledger: overlapping(promoted + 1_000, promoted + 2_000) })).failures).toEqual([
      '1 card(s) ran concurrently',
      "1 finished agent run(s) discarded with no fault of the soak's to explain it",
    ]);
  });

  it('fails a planned failover that saw no promotion, and a Redis kill the sentinels made a failover of', () => {
    expect(reconcile(input({ failover: failover([]) })).failures).toEqual(['1 planned failover(s) with no promotion']);
    expect(reconcile(input({ failover: failover([record()], { redisKillsFailedOver: 1 }) })).failures).toEqual(['1 Redis kill(s) the sentinels turned into a failover']);
  });

  it("counts what the failover lost, the runs in flight at the kill and how they ended, and the workers' run events in the window", () => {
    // c1: run a in flight at the kill, its done lost with the failover, run again as b, which is committed.
    const r = reconcile(
      input({
        ledger: [start('a', 'sb-a', kill - 3_000), end('a', 'sb-a', kill - 500), start('b', 'sb-b', promoted + 5_000), end('b', 'sb-b', T - 1_000)],
        cards: new Map([
          [
            'c1',
            {
              ...card(['queued', 'running', 'running', 'done']),
              history: [
                { at: new Date(kill - 4_000).toISOString(), state: 'queued', attempt: 0 },
                { at: new Date(kill - 3_000).toISOString(), state: 'running', attempt: 1, sandboxId: 'sb-a' },
                { at: new Date(promoted + 5_000).toISOString(), state: 'running', attempt: 1, sandboxId: 'sb-b' },
                { at: new Date(T).toISOString(), state: 'done', attempt: 1, sandboxId: 'sb-b' },
              ],
            },
          ],
        ]),
        logs: {
          ...noLogs(),
          runEvents: [
            { atMs: kill + 4_000, event: 'card.fenced', label: 'worker-0.0' },
            { atMs: promoted + 100, event: 'card.stale-write', label: 'worker-1.0' },
            { atMs: kill - 100, event: 'card.fenced', label: 'worker-0.0' },
          ],
        },
        failover: failover([record({ movesLost: [{ card: 'c1', before: 'done', after: 'running' }], vanished: ['c9'], reposted: ['c9'] })]),
      }),
    );
    expect(r.failover).toMatchObject({
      planned: 1,
      completed: 1,
      promotionMs: [11_000],
      recordsVanished: 1,
      reposted: 1,
      movesLost: 1,
      donesLost: 1,
      inFlight: { runs: 0, committed: 0, ranAgain: 0 },
      runEvents: { 'card.fenced': 1, 'card.late-commit': 0, 'card.stale-write': 1, 'card.discarded': 0 },
      discardedRuns: 1,
    });
    expect(r.examples.discardedRuns).toEqual(['c1: run a in sb-a: its done was lost in the failover (not yet replicated when the primary died), and the card ran again']);
    expect(r.examples.failoverLosses).toEqual(['c9: record gone on redis-b :2, re-posted, now no answer', 'c1: done before the kill, running on redis-b :2, now done']);
    expect(r.failures).toEqual([]);
  });

  it('a run in flight at the kill either commits its own outcome or its card runs again', () => {
    const inFlight = (ledger: LedgerRecord[]) => reconcile(input({ ledger, failover: failover([record()]) })).failover.inFlight;
    // Run a spans the kill and its done (at T, sandbox sb-a) is its own.
    expect(inFlight([start('a', 'sb-a', kill - 1_000), end('a', 'sb-a', promoted + 1_000)])).toEqual({ runs: 1, committed: 1, ranAgain: 0 });
    // Run x spans the kill and never ends; run a, after the promotion, is the one committed.
    expect(inFlight([start('x', 'sb-x', kill - 1_000), start('a', 'sb-a', promoted + 1_000), end('a', 'sb-a', T - 1_000)])).toEqual({ runs: 1, committed: 0, ranAgain: 1 });
    // A run with no end (a sandbox kill) followed by another run before the failover was not in flight at it.
    expect(
      inFlight([
        start('x', 'sb-x', kill - 9_000),
        start('y', 'sb-y', kill - 5_000),
        end('y', 'sb-y', kill - 4_000),
        start('a', 'sb-a', promoted + 1_000),
        end('a', 'sb-a', T - 1_000),
      ]),
    ).toEqual({
      runs: 0,
      committed: 0,
      ranAgain: 0,
    });
  });
});
