import type { CardRecord } from '@lanes/contracts';
import type { InjectedFault, SandboxKill } from './faults.js';
import type { Run } from './ledger.js';
import type { WorkerLife } from './reconcile.js';

/** What the soak knows that may explain a finished run lanes did not record. */
export interface WastedRunContext {
  cards: ReadonlyMap<string, CardRecord | undefined>;
  runs: ReadonlyMap<string, Run[]>;
  workers: readonly WorkerLife[];
  sandboxKills: readonly SandboxKill[];
  injected: readonly InjectedFault[];
  /** Cards whose cancel the API answered 202. */
  acceptedCancels: ReadonlySet<string>;
  /** Cards the schedule meant to fail. */
  intendedFailures?: ReadonlySet<string>;
  /** How long after a finished run its worker still needs to commit it (a lock, and an outage). */
  commitWindowMs: number;
  /**
   * Sentinel failovers: the kill, the promotion, the end of the window in which the README admits
   * a run whose lock was not replicated going on beside its card's next run, and the cards whose
   * done the new primary did not have.
   */
  failovers?: ReadonlyArray<{ atMs: number; promotedAtMs: number; admittedUntilMs: number; donesLost: ReadonlySet<string> }>;
}

export interface DiscardedRun {
  card: string;
  run: string;
  sandbox: string;
  /** Why the soak expects it was lost; undefined when nothing it did explains it. */
  explained?: string;
  /** The explanation is a failover's. */
  byFailover?: boolean;
  /** For an unexplained one: its card's history, so the report shows what lanes did with the card. */
  trail?: string;
}

export interface WastedRuns {
  /** Runs whose agent finished its work (`ok` in the ledger). */
  finished: number;
  /** Agent runs started per done card. */
  runsPerDoneCard: number;
  discarded: DiscardedRun[];
}

/** The worker whose slot ran `sandbox` for this card: the running entry's `slot <workerId>-…` message. */
export function workerOf(card: CardRecord | undefined, sandbox: string, workers: readonly WorkerLife[]): WorkerLife | undefined {
  const slot = card?.history.find((h) => h.state === 'running' && h.sandboxId === sandbox)?.message?.replace(/^slot /, '');
  if (!slot) return undefined;
  return workers.find((w) => w.workerId !== undefined && slot.startsWith(`${w.workerId}-`));
}

/** The run whose outcome the card's done move recorded: its sandbox's last finished run before the move. */
export function committedRun(card: CardRecord | undefined, runs: readonly Run[]): Run | undefined {
  const done = card?.state === 'done' ? card.history.find((h) => h.state === 'done') : undefined;
  if (!done) return undefined;
  const doneAtMs = Date.parse(done.at);
  const candidates = runs.filter((r) => r.outcome === 'ok' && r.endMs !== undefined && r.endMs <= doneAtMs && (done.sandboxId === undefined || r.sandbox === done.sandboxId));
  return candidates.sort((a, b) => b.endMs! - a.endMs!)[0];
}

function explain(run: Run, ctx: WastedRunContext): string | undefined {
  const endMs = run.endMs!;
  const within = (atMs: number) => atMs >= endMs && atMs <= endMs + ctx.commitWindowMs;
  if (ctx.acceptedCancels.has(run.card)) return 'a cancel was accepted for its card';
  const by = supersededBy(ctx.cards.get(run.card));
  if (by !== undefined) return `its card was superseded by ${by} (README "One run per PR")`;
  if (ctx.intendedFailures?.has(run.card)) return 'the schedule meant its card to fail';
  const worker = workerOf(ctx.cards.get(run.card), run.sandbox, ctx.workers);
  if (worker?.killed && worker.endedAtMs !== undefined && within(worker.endedAtMs)) return `its worker ${worker.label} was killed before it could commit`;
  if (worker?.partitions.some(([from, to]) => from <= endMs + ctx.commitWindowMs && to >= endMs))
    return `its worker ${worker.label} was cut off when it finished, and the card was taken over`;
  if (ctx.sandboxKills.some((k) => k.sandboxId === run.sandbox && within(k.atMs))) return 'its sandbox was killed before lanes read the result';
  const outage = ctx.injected.find((f) => f.kind === 'redis-kill' && !f.skipped && f.atMs <= endMs + ctx.commitWindowMs && f.endMs >= endMs);
  if (outage) return 'Redis was away when it finished, and the card was taken over';
  return failoverExplanation(run, ctx);
}

/** A failover's part in a lost finished run: its done not replicated, or no primary when it finished. */
function failoverExplanation(run: Run, ctx: WastedRunContext): string | undefined {
  const endMs = run.endMs!;
  if (ctx.failovers?.some((f) => f.donesLost.has(run.card) && endMs <= f.atMs))
    return 'its done was lost in the failover (not yet replicated when the primary died), and the card ran again';
  if (ctx.failovers?.some((f) => f.atMs <= endMs + ctx.commitWindowMs && f.promotedAtMs >= endMs)) return 'the primary failed over when it finished, and the card was taken over';
  if (ctx.failovers?.some((f) => run.startMs < f.atMs && endMs >= f.atMs && endMs <= f.admittedUntilMs))
    return 'it ran across the failover and its card was taken over on the new primary (its lock or move not replicated)';
  return undefined;
}

/** The card's moves, each with its sandbox and message: `running lsb-… (slot w-soak-0) → queued (handed back on shutdown) → …`. */
export function trailOf(card: CardRecord | undefined): string {
  if (!card) return 'no card record';
  return card.history.map((h) => [h.state, h.sandboxId, h.message ? `(${h.message})` : undefined].filter(Boolean).join(' ')).join(' → ');
}

/** `superseded by <id>` at the end of the card's last history entry (README "One run per PR"; a cancel's `cancelled during agent: …` included). */
export function supersededBy(card: CardRecord | undefined): string | undefined {
  if (card?.state !== 'cancelled') return undefined;
  return /superseded by (\S+)$/.exec(card.history.at(-1)?.message ?? '')?.[1];
}

/**
 * Finished agent runs that no card move recorded (issue "No finished run wasted"): every `ok` run of
 * a card that did not end done, and every one but the committed run of a done card.
 */
export function wastedRuns(ctx: WastedRunContext): WastedRuns {
  let finished = 0;
  let startedForDone = 0;
  const doneCards = [...ctx.cards.values()].filter((c) => c?.state === 'done').length;
  const discarded: DiscardedRun[] = [];
  for (const [id, runs] of ctx.runs) {
    const card = ctx.cards.get(id);
    const ok = runs.filter((r) => r.outcome === 'ok' && r.endMs !== undefined);
    finished += ok.length;
    if (card?.state === 'done') startedForDone += runs.length;
    const committed = committedRun(card, runs);
    for (const r of ok) {
      if (r === committed) continue;
      const why = explain(r, ctx);
      const byFailover = why !== undefined && why === failoverExplanation(r, ctx);
      discarded.push({
        card: id,
        run: r.run,
        sandbox: r.sandbox,
        ...(why ? { explained: why } : { trail: trailOf(card) }),
        ...(byFailover ? { byFailover } : {}),
      });
    }
  }
  return { finished, runsPerDoneCard: doneCards ? startedForDone / doneCards : 0, discarded };
}
