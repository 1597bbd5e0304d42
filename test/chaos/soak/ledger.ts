import { existsSync, readFileSync } from 'node:fs';
import { z } from 'zod';

const RunIdentity = z.object({ card: z.string(), run: z.string(), attempt: z.number(), sandbox: z.string(), pid: z.number() });

/** One line the agent (agent.mjs) appended. */
export const LedgerRecordSchema = z.discriminatedUnion('type', [
  RunIdentity.extend({ type: z.literal('start'), at: z.number(), workMs: z.number() }),
  RunIdentity.extend({ type: z.literal('end'), at: z.number(), outcome: z.string() }),
  RunIdentity.extend({
    type: z.literal('concurrent'),
    at: z.number(),
    phase: z.string(),
    other: z.object({ run: z.string(), sandbox: z.string().optional(), unanswered: z.boolean().optional() }).loose(),
  }),
]);
export type LedgerRecord = z.infer<typeof LedgerRecordSchema>;

export interface Run {
  card: string;
  run: string;
  sandbox: string;
  startMs: number;
  /** Undefined when the run never wrote its end (its sandbox was SIGKILLed, say). */
  endMs?: number;
  outcome?: string;
}

/** Reads the ledger; a torn last line (the writer was killed mid-write) is skipped and counted. */
export function readLedger(path: string): { records: LedgerRecord[]; unreadable: number } {
  if (!existsSync(path)) return { records: [], unreadable: 0 };
  const records: LedgerRecord[] = [];
  let unreadable = 0;
  for (const line of readFileSync(path, 'utf8').split('\n')) {
    if (!line.trim()) continue;
    try {
      records.push(LedgerRecordSchema.parse(JSON.parse(line)));
    } catch {
      unreadable += 1;
    }
  }
  return { records, unreadable };
}

export function runsOf(records: readonly LedgerRecord[]): Map<string, Run[]> {
  const byRun = new Map<string, Run>();
  for (const r of records) {
    if (r.type === 'start') byRun.set(r.run, { card: r.card, run: r.run, sandbox: r.sandbox, startMs: r.at });
  }
  for (const r of records) {
    const run = byRun.get(r.run);
    if (r.type === 'end' && run) Object.assign(run, { endMs: r.at, outcome: r.outcome });
  }
  const byCard = new Map<string, Run[]>();
  for (const run of byRun.values()) byCard.set(run.card, [...(byCard.get(run.card) ?? []), run]);
  return byCard;
}

/** One piece of evidence that a card ran in two places at once, and when the overlap was. */
export interface Overlap {
  why: string;
  /** The overlap's span as the ledger shows it: a met live run is one moment, an interval overlap its span. */
  fromMs: number;
  toMs: number;
}

/**
 * Cards that ran in two places at once, by two rules:
 * - proof: a run met another live run of the same card (a `concurrent` record; see agent.mjs for
 *   why that catches every overlap, SIGKILLed runs included);
 * - intervals: two runs of the card that both wrote their start and end overlap in time. A run with
 *   no end has no known end, so it is left to the first rule rather than guessed at (guessing "it
 *   ran until the next start" would call every sandbox kill a concurrent run).
 */
export function overlapsOf(records: readonly LedgerRecord[]): Map<string, Overlap[]> {
  const found = new Map<string, Overlap[]>();
  const note = (card: string, o: Overlap) => found.set(card, [...(found.get(card) ?? []), o]);
  for (const r of records) {
    if (r.type === 'concurrent')
      note(r.card, { why: `run ${r.run} in ${r.sandbox} met live run ${r.other.run} in ${r.other.sandbox ?? '?'} (${r.phase})`, fromMs: r.at, toMs: r.at });
  }
  for (const [card, runs] of runsOf(records)) {
    const ended = runs.filter((r) => r.endMs !== undefined).sort((a, b) => a.startMs - b.startMs);
    for (let i = 0; i < ended.length; i++) {
      for (let j = i + 1; j < ended.length; j++) {
        const a = ended[i]!;
        const b = ended[j]!;
        if (b.startMs < a.endMs!) note(card, { why: `runs ${a.run} and ${b.run} overlap by ${a.endMs! - b.startMs} ms`, fromMs: b.startMs, toMs: Math.min(a.endMs!, b.endMs!) });
      }
    }
  }
  return found;
}

/** `overlapsOf`, as the reasons only. */
export function concurrentCards(records: readonly LedgerRecord[]): Map<string, string[]> {
  return new Map([...overlapsOf(records)].map(([card, overlaps]) => [card, overlaps.map((o) => o.why)]));
}
