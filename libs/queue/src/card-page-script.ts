import type { Redis, Result } from 'ioredis';
import { z } from 'zod';
import type { BlockedReason, CardState } from '@lanes/contracts';
import type { CardListPosition } from './card-cursor.js';
import { STORE_PREFIX } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesCardPage(...args: Array<string | number>): Result<unknown, Context>;
  }
}

/** One index set a page reads, and what a card must be to belong in it. */
export interface IndexSource {
  key: string;
  lane: string;
  state: CardState;
  /** Set for a blocked-reason index: the card must be blocked for this reason. */
  blockedReason?: BlockedReason;
}

/** The hash fields a page answers per card, in this order (after its id and score). */
export const PAGE_FIELDS = [
  'lane',
  'state',
  'blockedReason',
  'card',
  'attempts',
  'infraRetries',
  'createdAt',
  'updatedAt',
  'blockedMessage',
  'failedReason',
  'sandboxId',
  'observedExitCode',
  'result',
] as const;

/**
 * One page of a listing, read in one atomic step over the index sets of a filter (names.ts
 * `cardIndex`, `blockedReasonIndex`; kept by card-script.ts and enqueue-script.ts).
 *
 * The sets are merged in one order: score descending, then id descending (bytewise, as Redis orders
 * a tie), starting after the position ARGV 2-3. Each set is entered by rank: the entries scored above
 * the position (ZCOUNT), then a binary search over the position's ties, O(log² n); then read by rank
 * in chunks of the page's size. Nothing walks entries it does not answer, so a page costs
 * O(sets × (log n + page)), whatever the sets hold.
 *
 * Each entry is checked against its card's record in the same step: the record must exist and be of
 * the set's lane and state (and blocked reason). One that is not names a card that expired (its
 * terminal set is trimmed only when a later card ends) or an id made again since: it is removed
 * (ZREM) and skipped. At most ARGV 6 entries are looked at, answered or skipped; a page that reaches
 * it answers what it has, with `more`.
 *
 * KEYS: the index sets. ARGV: 1 the card hash prefix, 2 the position's score, 3 its id ('' before
 * every id), 4 the lowest score listed (inclusive; '-inf' for none), 5 the page size, 6 the most
 * entries looked at, then per set: lane, state, blocked reason ('' for none).
 * Answers 'more' or 'end', the position after the page (score, id), then per card its id, score and
 * PAGE_FIELDS' values.
 */
const PAGE_LUA = `
local prefix, posScore, posId = ARGV[1], ARGV[2], ARGV[3]
local minScore = ARGV[4] == '-inf' and -math.huge or tonumber(ARGV[4])
local limit, budget = tonumber(ARGV[5]), tonumber(ARGV[6])
local chunk = limit + 1
-- Bytewise a < b (Lua's own < on strings follows the locale's collation, not Redis's order).
local function less(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local sets = {}
for k = 1, #KEYS do
  local key = KEYS[k]
  local above = redis.call('ZCOUNT', key, '(' .. posScore, '+inf')
  local ties = redis.call('ZCOUNT', key, posScore, posScore)
  local lo, hi = above, above + ties
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if less(redis.call('ZREVRANGE', key, mid, mid)[1], posId) then hi = mid else lo = mid + 1 end
  end
  local base = 6 + (k - 1) * 3
  sets[k] = {key = key, rank = lo, buf = {}, at = 1, drained = false, lane = ARGV[base + 1], state = ARGV[base + 2], reason = ARGV[base + 3]}
end
local function head(s)
  if s.at > #s.buf then
    if s.drained then return nil end
    local got = redis.call('ZREVRANGE', s.key, s.rank, s.rank + chunk - 1, 'WITHSCORES')
    s.rank = s.rank + #got / 2
    s.buf, s.at = {}, 1
    for i = 1, #got, 2 do
      local score = tonumber(got[i + 1])
      if score < minScore then s.drained = true; break end
      s.buf[#s.buf + 1] = {got[i], score, got[i + 1]}
    end
    if #got / 2 < chunk then s.drained = true end
    if #s.buf == 0 then return nil end
  end
  return s.buf[s.at]
end
local fields = {${PAGE_FIELDS.map((f) => `'${f}'`).join(', ')}}
local out = {}
local count, looked = 0, 0
local status = 'end'
while true do
  local best, from = nil, nil
  for k = 1, #sets do
    local h = head(sets[k])
    if h and (not best or h[2] > best[2] or (h[2] == best[2] and less(best[1], h[1]))) then best, from = h, sets[k] end
  end
  if not best then break end
  if looked >= budget then status = 'more'; break end
  local f = redis.call('HMGET', prefix .. best[1], unpack(fields))
  local fits = f[1] == from.lane and f[2] == from.state and (from.reason == '' or f[3] == from.reason)
  -- A full page ends before the next card that fits, which it does not take: there is more.
  if fits and count == limit then status = 'more'; break end
  from.at = from.at + 1
  looked = looked + 1
  posScore, posId = best[3], best[1]
  if fits then
    count = count + 1
    out[#out + 1] = best[1]
    out[#out + 1] = best[3]
    for i = 1, #fields do out[#out + 1] = f[i] end
  else
    redis.call('ZREM', from.key, best[1])
    -- It was read, so it stood before the set's next chunk, which moves up one rank.
    from.rank = from.rank - 1
  end
end
local reply = {status, posScore, posId}
for i = 1, #out do reply[#reply + 1] = out[i] end
return reply
`;

const SCRIPTS = { lanesCardPage: { lua: PAGE_LUA } };

export function definePageScript(redis: Redis): void {
  defineScriptsOnce(redis, SCRIPTS);
}

export interface PageScriptInput {
  sources: readonly IndexSource[];
  position: CardListPosition;
  minScore?: number;
  limit: number;
  /** The most entries looked at, answered or skipped. */
  budget: number;
}

/** The arguments of `lanesCardPage` (numkeys first), in the order PAGE_LUA documents. */
export function pageScriptArgs(input: PageScriptInput): Array<string | number> {
  return [
    input.sources.length,
    ...input.sources.map((s) => s.key),
    `${STORE_PREFIX}:card:`,
    String(input.position.score),
    input.position.id,
    input.minScore === undefined ? '-inf' : String(input.minScore),
    input.limit,
    input.budget,
    ...input.sources.flatMap((s) => [s.lane, s.state, s.blockedReason ?? '']),
  ];
}

/** One card as a page answers it: its id, its score, and PAGE_FIELDS (null where the hash has none). */
export interface PageEntry {
  id: string;
  score: number;
  fields: Record<(typeof PAGE_FIELDS)[number], string | null>;
}

export interface PageReply {
  more: boolean;
  /** Where the page ended: the next page starts after it. */
  position: CardListPosition;
  entries: PageEntry[];
}

const Nullable = z.string().nullable();
const ReplyHeadSchema = z.tuple([z.enum(['more', 'end']), z.string(), z.string()]).rest(Nullable);

/** What the script answered, decoded rather than trusted. */
export function parsePageReply(raw: unknown): PageReply {
  const [status, score, id, ...flat] = ReplyHeadSchema.parse(raw);
  const width = 2 + PAGE_FIELDS.length;
  if (flat.length % width !== 0) throw new Error(`card page script answered ${flat.length} values, not a multiple of ${width}`);
  const entries: PageEntry[] = [];
  for (let i = 0; i < flat.length; i += width) {
    const fields = Object.fromEntries(PAGE_FIELDS.map((f, j) => [f, flat[i + 2 + j] ?? null])) as PageEntry['fields'];
    entries.push({ id: z.string().parse(flat[i]), score: Number(z.string().parse(flat[i + 1])), fields });
  }
  return { more: status === 'more', position: { score: Number(score), id }, entries };
}
