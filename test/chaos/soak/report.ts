import { gateCounts, type GateName, type SoakResult } from './reconcile.js';

export interface RunInfo {
  runId: string;
  mode: string;
  seed: number;
  cards: number;
  minutes: number;
  workers: number;
  slots: number;
  lockMs: number;
  heartbeatMs: number;
  outageMs: number;
  elapsedMs: number;
  /** What served the stack: one redis-server, or a Sentinel group. */
  redis?: string;
}

const ms = (v: number | undefined) => (v === undefined ? '–' : `${(v / 1000).toFixed(1)} s`);
const list = <T>(vs: readonly T[], f: (v: T) => string) => vs.map(f).join(', ') || '–';
const bytes = (v: number | undefined) => (v === undefined ? '?' : `${v} B`);

/**
 * What the failovers lost and what lanes and the soak did about it: informational, since the README
 * says an asynchronous failover can lose an accepted card, a move, and let a card run twice. What it
 * must keep is gated in the rows above (lost at the end, once re-posted; terminal twice; concurrency
 * beyond the admitted window; unexplained discarded runs; board and queue).
 */
function failoverRows(r: SoakResult): Array<[string, string, string]> {
  const f = r.failover;
  if (f.planned === 0) return [];
  const ev = f.runEvents;
  return [
    ['failover: kill → promotion', list(f.promotionMs, ms), ''],
    ['failover: replica lag just before the kill / replication the promoted replica lacked (≥)', `${list(f.lagBytes, bytes)} / ${list(f.lostBytes, bytes)}`, ''],
    ['failover lost: accepted cards with no record on the new primary / re-posted by the soak', `${f.recordsVanished} / ${f.reposted}`, ''],
    ['failover lost: cards whose moves regressed / of them, a done', `${f.movesLost} / ${f.donesLost}`, ''],
    ['failover: runs in flight at the kill / committed their own outcome / card run again', `${f.inFlight.runs} / ${f.inFlight.committed} / ${f.inFlight.ranAgain}`, ''],
    [
      'failover: lanes fenced / committed late / refused as stale / discarded (worker events in the window)',
      `${ev['card.fenced']} / ${ev['card.late-commit']} / ${ev['card.stale-write']} / ${ev['card.discarded']}`,
      '',
    ],
    ['failover: cards run concurrently inside the admitted window (≤ promotion + 2 locks)', String(f.concurrentAdmitted), ''],
    ['failover: finished runs discarded it explains', String(f.discardedRuns), ''],
  ];
}

/** Concurrency keys and supersede keys (README "Fair per-key concurrency", "One run per PR"): only when the soak posted any. */
function keyRows(r: SoakResult, g: Record<GateName, number>, gate: (n: number) => string): Array<[string, string, string]> {
  const k = r.keys.concurrency;
  const s = r.keys.supersede;
  const rows: Array<[string, string, string]> = [];
  if (k.cards > 0) {
    rows.push(
      [`concurrency keys / keyed cards / maxRunningPerKey`, `${k.keys} / ${k.cards} / ${k.limit ?? 'none'}`, ''],
      ['concurrency key: most cards of one key running at once (ledger)', String(k.maxAtOnce), ''],
      [
        `runs started beyond their key's limit${r.failover.planned > 0 ? ' (outside a failover; inside)' : ''}`,
        r.failover.planned > 0 ? `${k.beyondLimit}; ${k.beyondLimitAdmitted}` : String(k.beyondLimit),
        gate(g.keyLimitExceeded),
      ],
    );
  }
  if (s.cards > 0) {
    rows.push(
      [
        `supersede keys / their cards${s.keysReposted ? ' / keys unjudged (a card re-posted after a failover)' : ''}`,
        `${s.keys} / ${s.cards}${s.keysReposted ? ` / ${s.keysReposted}` : ''}`,
        '',
      ],
      [
        `supersede key: runs of two of its cards at once${r.failover.planned > 0 ? ' (outside a failover; inside)' : ''}`,
        r.failover.planned > 0 ? `${s.overlaps}; ${s.overlapsAdmitted}` : String(s.overlaps),
        gate(g.supersedeRanConcurrently),
      ],
      [
        'superseded cards / cancelled as superseded / done, left to finish or finished first / cancelled by the soak / otherwise',
        `${s.superseded} / ${s.supersededCancelled} / ${s.supersededLeftToFinish} / ${s.supersededBySoakCancel} / ${s.supersededWrong}`,
        gate(g.supersededNotCancelled),
      ],
      ['newest cards of a key / done / cancelled by the soak / otherwise', `${s.newest} / ${s.newestDone} / ${s.newestBySoakCancel} / ${s.newestWrong}`, gate(g.newestNotDone)],
    );
  }
  return rows;
}

/** The soak's table: one row per figure, the last column says whether it fails the run. */
export function markdownReport(info: RunInfo, r: SoakResult): string {
  const g = gateCounts(r);
  const gate = (n: number) => (n > 0 ? '**FAIL**' : 'ok');
  const rows: Array<[string, string, string]> = [
    ['enqueued', String(r.enqueued), ''],
    ['done', String(r.done), ''],
    ['failed', String(r.failed), ''],
    ['failed, not intended by the schedule', String(r.unintendedFailed), gate(g.unintendedFailed)],
    ['cancelled', String(r.cancelled), ''],
    ['lost (not terminal at the end)', String(r.lost), gate(g.lost)],
    [r.failover.planned > 0 ? 'ran concurrently (outside what the README admits across a failover)' : 'ran concurrently', String(r.ranConcurrently), gate(g.ranConcurrently)],
    ['terminal twice in history', String(r.terminalTwice), gate(g.terminalTwice)],
    ['left a terminal state', String(r.leftTerminal), ''],
    ['runs started after their card was terminal', String(r.ranAfterTerminal), gate(g.ranAfterTerminal)],
    ['false reaps (owner alive, not partitioned)', String(r.falseReaps), gate(g.falseReaps)],
    ['reaps of a partitioned worker', String(r.reapsOfPartitioned), ''],
    ['reaps of dead owners', String(r.reapsOfDeadOwners), ''],
    ['reaps the soak could not judge (owner unknown / no sandbox id)', `${r.reapsOwnerUnknown} / ${r.reapsWithoutSandboxId}`, gate(g.reapsUnjudgeable)],
    [
      'sandboxes vanished (provider side): total / by the soak / by their owner / owner gone / unexplained (false reaps)',
      `${r.providerVanishes.total} / ${r.providerVanishes.bySoak} / ${r.providerVanishes.byOwner} / ${r.providerVanishes.ownerGone} / ${r.providerVanishes.unexplained} (of ${r.providerVanishes.seen} seen)`,
      gate(g.providerFalseReaps),
    ],
    ['sandbox kills injected / detected', `${r.sandboxKills.injected} / ${r.sandboxKills.detected}`, gate(g.sandboxKillsUndetected)],
    ['worker kills injected / detected', `${r.workerKills.injected} / ${r.workerKills.detected}`, gate(g.workerKillsUndetected)],
    ['recovery p50 / p95 (sandbox kill → running again or done)', `${ms(r.recoveryMs.p50)} / ${ms(r.recoveryMs.p95)} (n=${r.recoveryMs.samples})`, ''],
    [
      'cancels accepted (202) / ended cancelled / done, its run finished first',
      `${r.cancels.accepted} / ${r.cancels.endedCancelled} / ${r.cancels.finishedFirst}`,
      gate(g.cancelsNotHonoured),
    ],
    ['agent runs (ledger) / finished / per done card', `${r.runs} / ${r.finishedRuns} / ${r.runsPerDoneCard.toFixed(2)}`, ''],
    ['finished agent runs discarded / unexplained', `${r.finishedRunsDiscarded.total} / ${r.finishedRunsDiscarded.unexplained}`, gate(g.finishedRunsDiscardedUnexplained)],
    ['done without a finished run in the ledger', String(r.doneWithoutFinishedRun), gate(g.doneWithoutFinishedRun)],
    ['board and queue disagree', String(r.boardQueueDisagree), gate(g.boardQueueDisagree)],
    ['stack processes that exited by themselves', r.unexpectedExits.length ? r.unexpectedExits.join(', ') : '0', gate(g.unexpectedExits)],
    ['failovers planned / promoted', `${r.failover.planned} / ${r.failover.completed}`, gate(g.failoversIncomplete)],
    ['Redis kills the sentinels turned into a failover', String(r.failover.redisKillsFailedOver), gate(g.redisKillsFailedOver)],
    ...keyRows(r, g, gate),
    ...failoverRows(r),
  ];
  const faults = Object.entries(r.faults)
    .map(([k, n]) => `${k} ×${n}`)
    .join(', ');
  const out = [
    `### Soak ${info.runId}: seed ${info.seed}, ${info.cards} cards, ${info.minutes} min, mode ${info.mode}`,
    '',
    `${info.workers} workers × ${info.slots} slots, lock ${info.lockMs} ms, heartbeat ${info.heartbeatMs} ms, outages ${info.outageMs} ms; took ${ms(info.elapsedMs)}.`,
    ...(info.redis ? [`Redis: ${info.redis}.`] : []),
    `Faults injected: ${faults || 'none'}.`,
    '',
    '| figure | value | gate |',
    '|---|---|---|',
    ...rows.map(([a, b, c]) => `| ${a} | ${b} | ${c} |`),
    '',
  ];
  for (const [name, list] of Object.entries(r.examples)) {
    if (list.length) out.push(`${name}:`, ...list.map((l) => `  - ${l}`), '');
  }
  out.push(r.failures.length ? `RESULT: FAIL (${r.failures.join(', ')})` : 'RESULT: PASS');
  return out.join('\n');
}
