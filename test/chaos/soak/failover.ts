import type { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { keys } from '@lanes/queue';

/**
 * What a Sentinel failover lost, as the soak can see it. Just before it kills the primary, the
 * soak reads every card it has enqueued straight from the primary: whether its record exists, and
 * its history entries as stored. Right after the promotion it reads them again from the new primary.
 * A write Redis acknowledged but had not replicated is gone, and it shows as a record that vanished
 * (an accepted card the new primary does not have) or a history the new primary has only a shorter
 * prefix of (a move that regressed: a done that is running again, say). Writes made after the
 * promotion only append, so they cannot hide a loss. Writes acknowledged between the snapshot and
 * the kill (a few ms) are not seen; the replication offsets bound those.
 */

/** One card as stored: undefined when it has no record; else its history entries, raw. */
export type CardSnapshot = readonly string[] | undefined;

/** Reads `ids`' records (exists or not) and histories from one node, in one pipeline. */
export async function snapshotCards(conn: Redis, ids: readonly string[]): Promise<Map<string, CardSnapshot>> {
  const pipeline = conn.pipeline();
  for (const id of ids) {
    pipeline.exists(keys.card(id));
    pipeline.lrange(keys.history(id), 0, -1);
  }
  const replies = (await pipeline.exec()) ?? [];
  const out = new Map<string, CardSnapshot>();
  ids.forEach((id, i) => {
    const [existsErr, exists] = replies[2 * i] ?? [];
    const [historyErr, history] = replies[2 * i + 1] ?? [];
    if (existsErr || historyErr) throw existsErr ?? historyErr;
    out.set(id, exists === 1 ? (history as string[]) : undefined);
  });
  return out;
}

export interface LostMove {
  card: string;
  /** The last state before the failover, and the last the new primary had. */
  before: string;
  after: string;
}

export interface FailoverLoss {
  /** Cards with a record on the old primary and none on the new one. */
  vanished: string[];
  /** Cards whose history on the new primary does not begin with the history the old primary had. */
  movesLost: LostMove[];
}

const stateOf = (entry: string | undefined) => {
  if (entry === undefined) return 'none';
  try {
    return String((JSON.parse(entry) as { state?: unknown }).state ?? '?');
  } catch {
    return '?';
  }
};

/** Compares the snapshot before the kill with the one after the promotion (see the file's comment). */
export function failoverLoss(before: ReadonlyMap<string, CardSnapshot>, after: ReadonlyMap<string, CardSnapshot>): FailoverLoss {
  const vanished: string[] = [];
  const movesLost: LostMove[] = [];
  for (const [id, was] of before) {
    if (was === undefined) continue;
    const now = after.get(id);
    if (now === undefined) {
      vanished.push(id);
      continue;
    }
    // A history at its cap drops old entries as it grows: its prefix says nothing then.
    if (was.length >= defaults.DEFAULT_HISTORY_MAX_ENTRIES || now.length >= defaults.DEFAULT_HISTORY_MAX_ENTRIES) continue;
    if (was.some((entry, i) => now[i] !== entry)) movesLost.push({ card: id, before: stateOf(was.at(-1)), after: stateOf(now.at(-1)) });
  }
  return { vanished, movesLost };
}

/**
 * The replication stream the promoted replica lacked: the old primary's offset read just before the
 * kill (`master_repl_offset`) less the offset the replica had when it was promoted (its
 * `second_repl_offset` is that plus one). A lower bound: the primary may have written more between
 * the read and the kill. Undefined when either was not read.
 */
export function lostBytes(primaryOffsetBeforeKill: number | undefined, promotedSecondOffset: number | undefined): number | undefined {
  if (primaryOffsetBeforeKill === undefined || promotedSecondOffset === undefined || promotedSecondOffset < 1) return undefined;
  return Math.max(0, primaryOffsetBeforeKill - (promotedSecondOffset - 1));
}

/** What the soak records of one failover fault, for the verdict and the table. */
export interface FailoverRecord {
  /** Epoch ms of the kill, of the promotion seen, and of the end of the fault (old primary back as a replica, cards re-posted). */
  atMs: number;
  promotedAtMs: number;
  endMs: number;
  oldPrimary: string;
  newPrimary: string;
  /** The replica's lag read just before the kill (primary offset − replica offset), bytes. */
  lagBytesBeforeKill?: number;
  /** See `lostBytes`. */
  lostBytes?: number;
  /** Cards the snapshot read. */
  cardsRead: number;
  vanished: string[];
  movesLost: LostMove[];
  /** Vanished cards (and accepted cards missing after the promotion) the soak posted again, as a board would, and whether the API took them. */
  reposted: string[];
  repostAccepted: boolean;
  /** The old primary came back as a replica of the new one and synced. */
  oldPrimaryRejoined: boolean;
}
