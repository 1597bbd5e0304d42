import type { CardRecord } from '@lanes/contracts';
import type { SandboxKill } from './faults.js';
import type { Run } from './ledger.js';
import type { WorkerLife } from './reconcile.js';
import { supersededBy, trailOf, workerOf } from './wasted-runs.js';

/** A card's keys as the soak posted it (schedule.ts `assignKeys`). */
export interface KeyedPlanCard {
  id: string;
  concurrencyKey?: string;
  supersedeKey?: string;
  supersede?: 'cancel-running';
}

export interface KeyInput {
  /** Every card of the plan, in the order the soak posted them. */
  plan: readonly KeyedPlanCard[];
  /** The lane's `maxRunningPerKey`; undefined: no key limit. */
  maxRunningPerKey?: number;
  /** When the API answered each card's first accepted POST (its arrival's cancel of the earlier card is done by then). */
  postedAtMs: ReadonlyMap<string, number>;
}

export interface KeyContext {
  cards: ReadonlyMap<string, CardRecord | undefined>;
  runs: ReadonlyMap<string, Run[]>;
  workers: readonly WorkerLife[];
  sandboxKills: readonly SandboxKill[];
  /** Cards whose cancel by the soak (a fault) the API answered 202, and when each first was. */
  acceptedCancels: ReadonlySet<string>;
  /** Cards a failover lost and the soak posted again: their key's order is no longer the plan's. */
  reposted: ReadonlySet<string>;
  /** Inside what the README admits across a Sentinel failover (reconcile.ts `ADMITTED_OVERLAP_LOCKS`). */
  inAdmitted: (fromMs: number, toMs: number) => boolean;
}

/**
 * A run of a card with `supersede: "queued"` that passed its key's gate just before a newer card of
 * the key arrived moves to running a moment later and is left to finish: its running move may come
 * this long after the newer card's POST was answered (the gate check, then the move, on a loaded
 * 2-core box). Any later start of a superseded card is one its gate should have refused.
 */
export const ADMISSION_SLACK_MS = 1_000;

export interface KeyFigures {
  concurrency: {
    keys: number;
    cards: number;
    limit?: number;
    /** The most runs of distinct cards of one key seen at once in the ledger. */
    maxAtOnce: number;
    /** Runs that started while their key already had `limit` other cards running, outside a failover's admitted window. */
    beyondLimit: number;
    beyondLimitAdmitted: number;
  };
  supersede: {
    keys: number;
    cards: number;
    /** Keys left unjudged because a failover lost one of their cards and it was posted again (out of order). */
    keysReposted: number;
    /** Earlier cards of a key (a newer one followed). */
    superseded: number;
    /** Of those: ended cancelled `superseded by <a later card of the key>`; ended done as the README allows (running and left to finish, or finished first); cancelled by the soak's own cancel. */
    supersededCancelled: number;
    supersededLeftToFinish: number;
    supersededBySoakCancel: number;
    /** Superseded cards that ended any other way. */
    supersededWrong: number;
    newest: number;
    newestDone: number;
    newestBySoakCancel: number;
    newestWrong: number;
    /** Runs of two cards of one supersede key at once, outside a failover's admitted window. */
    overlaps: number;
    overlapsAdmitted: number;
  };
}

export interface KeyVerdict {
  figures: KeyFigures;
  examples: { keyBeyondLimit: string[]; supersedeOverlaps: string[]; supersededWrong: string[]; newestWrong: string[] };
}

interface Span {
  card: string;
  run: string;
  startMs: number;
  endMs: number;
}

/**
 * A run's span in the ledger: its start to its end; a run that wrote no end (its sandbox or worker
 * was killed with it) ends at the latest at that kill. One with neither is left out: its end is unknown.
 */
export function spanOf(run: Run, ctx: Pick<KeyContext, 'cards' | 'workers' | 'sandboxKills'>): Span | undefined {
  if (run.endMs !== undefined) return { card: run.card, run: run.run, startMs: run.startMs, endMs: run.endMs };
  const kill = ctx.sandboxKills.filter((k) => k.sandboxId === run.sandbox && k.atMs >= run.startMs).map((k) => k.atMs);
  const worker = workerOf(ctx.cards.get(run.card), run.sandbox, ctx.workers);
  const workerEnd = worker?.endedAtMs !== undefined && worker.endedAtMs >= run.startMs ? [worker.endedAtMs] : [];
  const bound = Math.min(...kill, ...workerEnd);
  return Number.isFinite(bound) ? { card: run.card, run: run.run, startMs: run.startMs, endMs: bound } : undefined;
}

export interface Crowding {
  /** The run that started while its key already had `limit` other cards running. */
  run: Span;
  others: Span[];
  fromMs: number;
  toMs: number;
}

/**
 * Runs of one key that started while `limit` other cards of the key were running (back to back is
 * not at once). The most runs at once is reached at some start, so checking every start is enough.
 */
export function crowdings(spans: readonly Span[], limit: number): { crowded: Crowding[]; maxAtOnce: number } {
  const crowded: Crowding[] = [];
  let maxAtOnce = 0;
  for (const s of spans) {
    const others = spans.filter((o) => o.card !== s.card && o.startMs <= s.startMs && o.endMs > s.startMs);
    const atOnce = 1 + new Set(others.map((o) => o.card)).size;
    maxAtOnce = Math.max(maxAtOnce, atOnce);
    if (atOnce > limit) crowded.push({ run: s, others, fromMs: s.startMs, toMs: Math.min(s.endMs, ...others.map((o) => o.endMs)) });
  }
  return { crowded, maxAtOnce };
}

const describe = (key: string, c: Crowding, limit: number) =>
  `${key}: ${c.run.card} (run ${c.run.run}) started at ${new Date(c.fromMs).toISOString()} beside ${c.others.map((o) => `${o.card} (run ${o.run})`).join(', ')} (limit ${limit})`;

function groupBy<T>(items: readonly T[], key: (t: T) => string | undefined): Map<string, T[]> {
  const out = new Map<string, T[]>();
  for (const t of items) {
    const k = key(t);
    if (k !== undefined) out.set(k, [...(out.get(k) ?? []), t]);
  }
  return out;
}

/** How the verdict reads an earlier card's end: one the README allows, or what was wrong with it. */
type SupersededEnd = { end: 'cancelled' | 'left-to-finish' | 'soak-cancel' } | { wrong: string };

/**
 * How an earlier card of a supersede key may end (README "One run per PR"): cancelled, superseded by
 * a later card of its key; or done when it was already running as the newer card arrived and the
 * newer card's mode is `queued` (left to finish), or when its run finished before the newer card's
 * arrival was answered (a cancel of a finished run); or cancelled by the soak's own cancel.
 */
function judgeSuperseded(card: KeyedPlanCard, later: readonly KeyedPlanCard[], input: KeyInput, ctx: KeyContext): SupersededEnd {
  const record = ctx.cards.get(card.id);
  const by = supersededBy(record);
  if (by !== undefined && later.some((l) => l.id === by)) return { end: 'cancelled' };
  if (record?.state === 'cancelled' && ctx.acceptedCancels.has(card.id)) return { end: 'soak-cancel' };
  const next = later[0]!;
  const arrivedAtMs = input.postedAtMs.get(next.id);
  if (record?.state === 'done' && arrivedAtMs !== undefined) {
    const doneAt = record.history.findIndex((h) => h.state === 'done');
    const lastRunning = record.history
      .slice(0, doneAt)
      .filter((h) => h.state === 'running')
      .at(-1);
    if (next.supersede === undefined && lastRunning && Date.parse(lastRunning.at) <= arrivedAtMs + ADMISSION_SLACK_MS) return { end: 'left-to-finish' };
    if ((ctx.runs.get(card.id) ?? []).some((r) => r.outcome === 'ok' && r.endMs !== undefined && r.endMs <= arrivedAtMs)) return { end: 'left-to-finish' };
  }
  const mode = next.supersede ?? 'queued';
  return {
    wrong: `${card.id} (then ${next.id}, ${mode}, answered ${arrivedAtMs === undefined ? '?' : new Date(arrivedAtMs).toISOString()}): ${record?.state ?? 'no answer'}; ${trailOf(record)}`,
  };
}

const EXAMPLES = 10;

/** The gates of concurrency keys and supersede keys, judged from the ledger and the cards' ends. */
export function judgeKeys(input: KeyInput, ctx: KeyContext): KeyVerdict {
  const spansOf = (cards: readonly KeyedPlanCard[]) => cards.flatMap((c) => (ctx.runs.get(c.id) ?? []).map((r) => spanOf(r, ctx))).filter((s): s is Span => s !== undefined);
  const examples: KeyVerdict['examples'] = { keyBeyondLimit: [], supersedeOverlaps: [], supersededWrong: [], newestWrong: [] };

  const byKey = groupBy(input.plan, (c) => c.concurrencyKey);
  const limit = input.maxRunningPerKey;
  let maxAtOnce = 0;
  let beyondLimit = 0;
  let beyondLimitAdmitted = 0;
  for (const [key, cards] of byKey) {
    const found = crowdings(spansOf(cards), limit ?? Number.POSITIVE_INFINITY);
    maxAtOnce = Math.max(maxAtOnce, found.maxAtOnce);
    for (const c of found.crowded) {
      if (ctx.inAdmitted(c.fromMs, c.toMs)) beyondLimitAdmitted += 1;
      else {
        beyondLimit += 1;
        examples.keyBeyondLimit.push(describe(key, c, limit!));
      }
    }
  }

  const bySupersede = groupBy(input.plan, (c) => c.supersedeKey);
  const s: KeyFigures['supersede'] = {
    keys: bySupersede.size,
    cards: [...bySupersede.values()].reduce((n, cs) => n + cs.length, 0),
    keysReposted: 0,
    superseded: 0,
    supersededCancelled: 0,
    supersededLeftToFinish: 0,
    supersededBySoakCancel: 0,
    supersededWrong: 0,
    newest: 0,
    newestDone: 0,
    newestBySoakCancel: 0,
    newestWrong: 0,
    overlaps: 0,
    overlapsAdmitted: 0,
  };
  for (const [key, cards] of bySupersede) {
    for (const c of crowdings(spansOf(cards), 1).crowded) {
      if (ctx.inAdmitted(c.fromMs, c.toMs)) s.overlapsAdmitted += 1;
      else {
        s.overlaps += 1;
        examples.supersedeOverlaps.push(describe(key, c, 1));
      }
    }
    if (cards.some((c) => ctx.reposted.has(c.id))) {
      s.keysReposted += 1;
      continue;
    }
    cards.forEach((card, i) => {
      const later = cards.slice(i + 1);
      if (later.length === 0) {
        s.newest += 1;
        const record = ctx.cards.get(card.id);
        if (record?.state === 'done') s.newestDone += 1;
        else if (record?.state === 'cancelled' && ctx.acceptedCancels.has(card.id)) s.newestBySoakCancel += 1;
        else {
          s.newestWrong += 1;
          examples.newestWrong.push(`${card.id} (${key}'s newest): ${record?.state ?? 'no answer'}; ${trailOf(record)}`);
        }
        return;
      }
      s.superseded += 1;
      const verdict = judgeSuperseded(card, later, input, ctx);
      if ('wrong' in verdict) {
        s.supersededWrong += 1;
        examples.supersededWrong.push(`${key}: ${verdict.wrong}`);
      } else if (verdict.end === 'cancelled') s.supersededCancelled += 1;
      else if (verdict.end === 'left-to-finish') s.supersededLeftToFinish += 1;
      else s.supersededBySoakCancel += 1;
    });
  }
  const figures: KeyFigures = {
    concurrency: {
      keys: byKey.size,
      cards: [...byKey.values()].reduce((n, cs) => n + cs.length, 0),
      ...(limit !== undefined ? { limit } : {}),
      maxAtOnce,
      beyondLimit,
      beyondLimitAdmitted,
    },
    supersede: s,
  };
  return {
    figures,
    examples: Object.fromEntries(Object.entries(examples).map(([k, v]) => [k, v.slice(0, EXAMPLES)])) as KeyVerdict['examples'],
  };
}
