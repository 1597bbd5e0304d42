import { describe, expect, it } from 'vitest';
import { failuresOf, gateCounts, type GateName, type SoakResult } from './reconcile.js';
import { markdownReport, type RunInfo } from './report.js';

const info: RunInfo = { runId: 'r1', mode: 'plain', seed: 1, cards: 1, minutes: 1, workers: 2, slots: 1, lockMs: 4_000, heartbeatMs: 500, outageMs: 6_000, elapsedMs: 1 };
const clean: SoakResult = {
  enqueued: 1,
  done: 1,
  failed: 0,
  unintendedFailed: 0,
  cancelled: 0,
  lost: 0,
  ranConcurrently: 0,
  terminalTwice: 0,
  leftTerminal: 0,
  falseReaps: 0,
  reapsOfPartitioned: 0,
  reapsOfDeadOwners: 0,
  reapsOwnerUnknown: 0,
  reapsWithoutSandboxId: 0,
  providerVanishes: { seen: 6, total: 1, bySoak: 1, byOwner: 0, ownerGone: 0, unexplained: 0 },
  sandboxKills: { injected: 1, detected: 1 },
  workerKills: { injected: 1, detected: 1 },
  recoveryMs: { samples: 0 },
  cancels: { accepted: 1, endedCancelled: 0, finishedFirst: 1 },
  doneWithoutFinishedRun: 0,
  ranAfterTerminal: 0,
  unexpectedExits: [],
  boardQueueDisagree: 0,
  runs: 1,
  finishedRuns: 1,
  runsPerDoneCard: 1,
  finishedRunsDiscarded: { total: 0, unexplained: 0 },
  failover: {
    planned: 0,
    completed: 0,
    redisKillsFailedOver: 0,
    promotionMs: [],
    lagBytes: [],
    lostBytes: [],
    recordsVanished: 0,
    reposted: 0,
    movesLost: 0,
    donesLost: 0,
    inFlight: { runs: 0, committed: 0, ranAgain: 0 },
    concurrentAdmitted: 0,
    runEvents: { 'card.fenced': 0, 'card.late-commit': 0, 'card.stale-write': 0, 'card.discarded': 0 },
    discardedRuns: 0,
  },
  keys: {
    concurrency: { keys: 3, cards: 18, limit: 1, maxAtOnce: 1, beyondLimit: 0, beyondLimitAdmitted: 0 },
    supersede: {
      keys: 4,
      cards: 12,
      keysReposted: 0,
      superseded: 8,
      supersededCancelled: 6,
      supersededLeftToFinish: 1,
      supersededBySoakCancel: 1,
      supersededWrong: 0,
      newest: 4,
      newestDone: 4,
      newestBySoakCancel: 0,
      newestWrong: 0,
      overlaps: 0,
      overlapsAdmitted: 0,
    },
  },
  faults: {},
  examples: {
    lost: [],
    concurrent: [],
    terminalTwice: [],
    falseReaps: [],
    leftTerminal: [],
    boardQueueDisagree: [],
    acceptedCancelNotCancelled: [],
    unintendedFailed: [],
    doneWithoutFinishedRun: [],
    ranAfterTerminal: [],
    unjudgeableReaps: [],
    discardedRuns: [],
    failoverLosses: [],
    concurrentAdmitted: [],
    providerFalseReaps: [],
    keyBeyondLimit: [],
    supersedeOverlaps: [],
    supersededWrong: [],
    newestWrong: [],
  },
  failures: [],
};
const noKeys: SoakResult['keys'] = {
  concurrency: { keys: 0, cards: 0, maxAtOnce: 0, beyondLimit: 0, beyondLimitAdmitted: 0 },
  supersede: { ...clean.keys.supersede, keys: 0, cards: 0, superseded: 0, supersededCancelled: 0, supersededLeftToFinish: 0, supersededBySoakCancel: 0, newest: 0, newestDone: 0 },
};

const failRows = (report: string) => report.split('\n').filter((l) => l.startsWith('| ') && l.endsWith('| **FAIL** |'));

describe('markdownReport', () => {
  it('marks every gate ok on a clean run, and says PASS', () => {
    const report = markdownReport(info, clean);
    expect(failRows(report)).toEqual([]);
    expect(report.split('\n').filter((l) => l.endsWith('| ok |'))).toHaveLength(Object.keys(gateCounts(clean)).length);
    expect(report).toMatch(/RESULT: PASS$/);
  });

  // Each gate failing on its own shows as exactly one FAIL row of the table.
  it.each<[GateName, Partial<SoakResult>, string]>([
    ['lost', { lost: 1 }, 'lost (not terminal at the end)'],
    ['ranConcurrently', { ranConcurrently: 1 }, 'ran concurrently'],
    ['terminalTwice', { terminalTwice: 1 }, 'terminal twice in history'],
    ['falseReaps', { falseReaps: 1 }, 'false reaps (owner alive, not partitioned)'],
    ['unintendedFailed', { failed: 1, unintendedFailed: 1 }, 'failed, not intended by the schedule'],
    ['doneWithoutFinishedRun', { doneWithoutFinishedRun: 1 }, 'done without a finished run in the ledger'],
    ['ranAfterTerminal', { ranAfterTerminal: 1 }, 'runs started after their card was terminal'],
    ['unexpectedExits', { unexpectedExits: ['api'] }, 'stack processes that exited by themselves'],
    ['sandboxKillsUndetected', { sandboxKills: { injected: 2, detected: 1 } }, 'sandbox kills injected / detected'],
    ['workerKillsUndetected', { workerKills: { injected: 2, detected: 1 } }, 'worker kills injected / detected'],
    ['cancelsNotHonoured', { cancels: { accepted: 2, endedCancelled: 0, finishedFirst: 1 } }, 'cancels accepted (202) / ended cancelled / done, its run finished first'],
    ['boardQueueDisagree', { boardQueueDisagree: 1 }, 'board and queue disagree'],
    [
      'providerFalseReaps',
      { providerVanishes: { ...clean.providerVanishes, total: 2, unexplained: 1 } },
      'sandboxes vanished (provider side): total / by the soak / by their owner / owner gone / unexplained (false reaps)',
    ],
    ['reapsUnjudgeable', { reapsWithoutSandboxId: 1 }, 'reaps the soak could not judge (owner unknown / no sandbox id)'],
    ['finishedRunsDiscardedUnexplained', { finishedRunsDiscarded: { total: 2, unexplained: 1 } }, 'finished agent runs discarded / unexplained'],
    ['failoversIncomplete', { failover: { ...clean.failover, planned: 1 } }, 'failovers planned / promoted'],
    ['redisKillsFailedOver', { failover: { ...clean.failover, redisKillsFailedOver: 1 } }, 'Redis kills the sentinels turned into a failover'],
    ['keyLimitExceeded', { keys: { ...clean.keys, concurrency: { ...clean.keys.concurrency, maxAtOnce: 2, beyondLimit: 1 } } }, "runs started beyond their key's limit"],
    ['supersedeRanConcurrently', { keys: { ...clean.keys, supersede: { ...clean.keys.supersede, overlaps: 1 } } }, 'supersede key: runs of two of its cards at once'],
    [
      'supersededNotCancelled',
      { keys: { ...clean.keys, supersede: { ...clean.keys.supersede, supersededCancelled: 5, supersededWrong: 1 } } },
      'superseded cards / cancelled as superseded / done, left to finish or finished first / cancelled by the soak / otherwise',
    ],
    [
      'newestNotDone',
      { keys: { ...clean.keys, supersede: { ...clean.keys.supersede, newestDone: 3, newestWrong: 1 } } },
      'newest cards of a key / done / cancelled by the soak / otherwise',
    ],
  ])('%s', (name, over, figure) => {
    const r = { ...clean, ...over };
    r.failures = failuresOf(r);
    expect(Object.entries(gateCounts(r)).filter(([, n]) => n > 0)).toEqual([[name, 1]]);
    const report = markdownReport(info, r);
    expect(failRows(report).map((l) => l.split(' | ')[0]!.slice(2))).toEqual([figure]);
    expect(report).toContain(`RESULT: FAIL (${r.failures[0]})`);
  });
});

describe('markdownReport: keys', () => {
  const row = (report: string, figure: string) => report.split('\n').find((l) => l.startsWith(`| ${figure} |`));
  it('shows the keys and the supersede outcomes as rows', () => {
    const report = markdownReport(info, clean);
    expect(row(report, 'concurrency keys / keyed cards / maxRunningPerKey')).toBe('| concurrency keys / keyed cards / maxRunningPerKey | 3 / 18 / 1 |  |');
    expect(row(report, "runs started beyond their key's limit")).toBe("| runs started beyond their key's limit | 0 | ok |");
    expect(row(report, 'superseded cards / cancelled as superseded / done, left to finish or finished first / cancelled by the soak / otherwise')).toContain(
      '| 8 / 6 / 1 / 1 / 0 | ok |',
    );
    expect(row(report, 'newest cards of a key / done / cancelled by the soak / otherwise')).toContain('| 4 / 4 / 0 / 0 | ok |');
  });
  it("has no key rows when the soak posted no keyed card (the default soak's table is as it was)", () => {
    const report = markdownReport(info, { ...clean, keys: noKeys });
    expect(report).not.toMatch(/concurrency key|supersede|superseded|newest/);
    expect(report.split('\n').filter((l) => l.endsWith('| ok |'))).toHaveLength(Object.keys(gateCounts(clean)).length - 4);
  });
  it('splits the key gates inside and outside a failover window when failovers are planned', () => {
    const keys = { ...clean.keys, concurrency: { ...clean.keys.concurrency, beyondLimitAdmitted: 2 } };
    const report = markdownReport(info, { ...clean, keys, failover: { ...clean.failover, planned: 1, completed: 1 } });
    expect(row(report, "runs started beyond their key's limit (outside a failover; inside)")).toContain('| 0; 2 | ok |');
  });
});

describe('markdownReport: failovers', () => {
  const failover: SoakResult['failover'] = {
    ...clean.failover,
    planned: 1,
    completed: 1,
    promotionMs: [11_234],
    lagBytes: [0],
    lostBytes: [0],
    recordsVanished: 1,
    reposted: 1,
    movesLost: 2,
    donesLost: 1,
    inFlight: { runs: 3, committed: 1, ranAgain: 2 },
    concurrentAdmitted: 1,
    runEvents: { 'card.fenced': 2, 'card.late-commit': 1, 'card.stale-write': 0, 'card.discarded': 0 },
    discardedRuns: 1,
  };
  it('shows what the failover lost and what lanes did, none of it a gate, and PASS when every gate holds', () => {
    const report = markdownReport({ ...info, redis: 'Sentinel' }, { ...clean, failover });
    const row = (figure: string) => report.split('\n').find((l) => l.startsWith(`| ${figure} |`));
    expect(row('failovers planned / promoted')).toBe('| failovers planned / promoted | 1 / 1 | ok |');
    expect(row('failover: kill → promotion')).toBe('| failover: kill → promotion | 11.2 s |  |');
    expect(row('failover lost: accepted cards with no record on the new primary / re-posted by the soak')).toContain('| 1 / 1 |  |');
    expect(row('failover lost: cards whose moves regressed / of them, a done')).toContain('| 2 / 1 |  |');
    expect(row('failover: runs in flight at the kill / committed their own outcome / card run again')).toContain('| 3 / 1 / 2 |');
    expect(row('ran concurrently (outside what the README admits across a failover)')).toBe('| ran concurrently (outside what the README admits across a failover) | 0 | ok |');
    expect(report).toContain('Redis: Sentinel.');
    expect(failRows(report)).toEqual([]);
    expect(report).toMatch(/RESULT: PASS$/);
  });
  it('has no failover rows without failovers, but its two gates', () => {
    const report = markdownReport(info, clean);
    expect(report.split('\n').filter((l) => l.startsWith('| failover'))).toEqual(['| failovers planned / promoted | 0 / 0 | ok |']);
  });
});
