import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** One record an agent appended: the card, what happened, and when (wall clock, ms). */
export interface LedgerLine {
  id: string;
  ev: 'start' | 'end';
  t: number;
  /** What the agent chose to add (e.g. the card's concurrency key). */
  [field: string]: unknown;
}

/**
 * A JSON-lines file outside the sandboxes where a test's agents record their starts and ends, so a
 * test reads what ran, when, and what ran at once, from the agents' own side.
 */
export function agentLedger(dir: string) {
  const file = join(dir, 'ledger.jsonl');
  writeFileSync(file, '');
  const lines = (): LedgerLine[] =>
    readFileSync(file, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as LedgerLine);
  return {
    file,
    lines,
    started: (id: string) => lines().some((l) => l.id === id && l.ev === 'start'),
    /** A line of agent JavaScript defining `log(ev, extra)`, which appends one record for the card in `card`. */
    logFunction: `const log = (ev, extra = {}) => appendFileSync(${JSON.stringify(file)}, JSON.stringify({ id: card.id, ev, t: Date.now(), ...extra }) + '\\n');`,
  };
}
