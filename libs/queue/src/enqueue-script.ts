import type { Redis, Result } from 'ioredis';
import { z } from 'zod';
import { CardStateSchema, SUPERSEDE_LATEST_TTL_MS, type Card } from '@lanes/contracts';
import { QUEUE_PREFIX, STORE_PREFIX, keys } from './names.js';
import { WRITE_JOB_LUA } from './bullmq-job-layout.js';
import { APPEND_EVENT_LUA } from './lane-event-streams.js';
import type { OpenBounds } from './open-cards.js';
import { defineScriptsOnce } from './redis-scripts.js';

/**
 * `lanesEnqueue` is the one writer of new card records: record, first history entry, the entry
 * in its lane's listing index of queued cards, and `card.queued` event, or nothing for an id that
 * exists. It runs in one of two modes (ARGV 7):
 *   - `each`: the records alone (`CardStore.create`). Each card stands alone: an existing id is
 *     answered with its state and lane and left as it is.
 *   - `enqueue`: records and jobs, the batch whole or not at all, described next.
 *
 * An enqueue writes each card's record and its BullMQ job atomically: no other client sees a
 * record without its job. Each card's job is written by this script itself (`writeJob`,
 * bullmq-job-layout.ts), so an enqueue is this one call. Where lanes does not write BullMQ's layout
 * (another BullMQ version), the enqueue is one MULTI instead: this script, then BullMQ's own add of
 * each card's job, then `lanesEnqueueRelease`.
 *
 * BullMQ's add is a no-op when the job's key exists (a duplicate). This script uses that to keep
 * such an add out where the card must not get a job: it puts a guard hash at that job key, and
 * `lanesEnqueueRelease` deletes the guards after the adds. A card gets a job only if
 *   - it is new (its record is written here), or
 *   - its record is queued and its job is gone (a crash between the two writes before enqueues
 *     were atomic): the job is written again.
 * A card whose record is in any other state (running, blocked, done, failed, cancelled) is never
 * given a job, even when BullMQ has removed its finished job (removeOnComplete/removeOnFail).
 * When any id of the batch belongs to a card on another lane, nothing is written and every add of
 * the batch is guarded: the batch is refused whole.
 *
 * A batch in which any card has a callbackUrl is refused whole, with nothing written and every add
 * of the batch guarded, while the callback stream holds ARGV 9 entries or more (0: no bound): its
 * entries stay until delivered, so past the bound a card whose callback could not be owed is not taken.
 * The same holds for a lane that owes ARGV 12 callbacks or more (keys.callbacksOwed; 0: no bound),
 * so one board whose endpoint never answers fills its own lane's share, not the stream every board
 * shares.
 *
 * A batch that would take a lane past its bounds on open cards (ARGV 11: `lane maxCards maxBytes`
 * triples, space separated; a lane not named has none) is refused whole the same way: a lane's open
 * cards are those queued, running or blocked, counted from its listing indexes, and their bytes are
 * their card JSON's, counted in keys.openBytes, against the new ids of the batch on it and their
 * JSON. Ids that exist are not new, so a re-post of a full lane's cards is still answered.
 *
 * Under Redis's maxmemory (noeviction) the script's first write is one Redis refuses (HSET, INCR),
 * so a full Redis refuses the whole script with nothing written (OOM); in the MULTI the adds are
 * refused the same way. Nothing of an enqueue is half-written.
 *
 * lanesEnqueue KEYS: 1 event stream, 2 guard set, 3 callback stream, 4 the lanes-since mark (each
 *   card.queued event goes to its lane's stream too, keys.laneEvents: lane-event-streams.ts).
 * ARGV: 1 event stream max length, 2 time (ISO), 3 history entry (JSON), 4 our key prefix, 5 BullMQ's
 *   key prefix, 6 the batch: per card `id TAB lane TAB callback flag TAB priority TAB job options TAB
 *   concurrency key TAB supersede key TAB card JSON NEWLINE`, where the job options (JSON) are ''
 *   unless this script writes the card's job and a key is '' for a card without one, 7 mode, 8 time (epoch
 *   ms, the job's timestamp), 9 callback backlog bound (entries; 0: none), 10 how long a lane
 *   remembers the newest card of a supersede key (ms, SUPERSEDE_LATEST_TTL_MS),
 *   11 each lane's bounds on open cards (`lane maxCards maxBytes …`), 12 the callbacks one lane
 *   may owe (entries; 0: no bound).
 *
 * A new card with a supersede key becomes its key's newest (`keys.supersedeLatest`) in the same
 * step its record is written, so two arrivals of one key are ordered, and each answers the card it
 * replaced as newest: the caller cancels that one (LaneQueues.supersede), and a run checks at its
 * admission that it is still its key's newest (supersede-gate.ts in apps/worker).
 * Ids and lanes are [A-Za-z0-9._-] and JSON.stringify escapes control characters, so TAB and
 * NEWLINE only ever separate. One argument instead of several per card: ioredis and Redis both pay per
 * argument, and the per-card keys (`keys` in names.ts) and the event are built here instead. The
 * card JSON is the job's data too.
 * Answers 'ok' or 'conflict' (never in `each` mode), then one string: per card, comma-separated, '' when it is new or
 * `state/lane` as it was before, then one more: per card, the id of the card of its supersede key it
 * replaced as newest, or ''; or 'backlog', the callback stream's length (or the lane's count) and
 * '' (or the lane that owes them); or 'full', the lane, its
 * open cards (or their bytes), the new ones (or their bytes) the batch would add, and 'cards' (or 'bytes').
 */
const ENQUEUE_LUA = `${WRITE_JOB_LUA}${APPEND_EVENT_LUA}
local sp, qp, at = ARGV[4], ARGV[5], ARGV[2]
local inMulti = ARGV[7] == 'enqueue'
local batch = ARGV[6]
local ids, lanes, cbs, prios, jobOpts, cks, sups, jsons = {}, {}, {}, {}, {}, {}, {}, {}
local pos, n = 1, 0
while pos <= #batch do
  local t1 = string.find(batch, '\\t', pos, true)
  local t2 = string.find(batch, '\\t', t1 + 1, true)
  local t3 = string.find(batch, '\\t', t2 + 1, true)
  local t4 = string.find(batch, '\\t', t3 + 1, true)
  local t5 = string.find(batch, '\\t', t4 + 1, true)
  local t6 = string.find(batch, '\\t', t5 + 1, true)
  local t7 = string.find(batch, '\\t', t6 + 1, true)
  local nl = string.find(batch, '\\n', t7 + 1, true)
  n = n + 1
  ids[n], lanes[n] = string.sub(batch, pos, t1 - 1), string.sub(batch, t1 + 1, t2 - 1)
  cbs[n], prios[n] = string.sub(batch, t2 + 1, t3 - 1), tonumber(string.sub(batch, t3 + 1, t4 - 1)) or 0
  jobOpts[n], cks[n], sups[n] = string.sub(batch, t4 + 1, t5 - 1), string.sub(batch, t5 + 1, t6 - 1), string.sub(batch, t6 + 1, t7 - 1)
  jsons[n] = string.sub(batch, t7 + 1, nl - 1)
  pos = nl + 1
end
-- A refused batch: every add BullMQ makes after this script (writeJobs off) finds a guard and does nothing.
local function guardAll()
  if not inMulti then return end
  for j = 1, n do
    local job = qp .. ':' .. lanes[j] .. ':' .. ids[j]
    if jobOpts[j] == '' and redis.call('EXISTS', job) == 0 then
      redis.call('HSET', job, 'lanesEnqueueGuard', '1')
      redis.call('SADD', KEYS[2], job)
    end
  end
end
local backlogMax, laneBacklogMax = tonumber(ARGV[9]) or 0, tonumber(ARGV[12]) or 0
if backlogMax > 0 or laneBacklogMax > 0 then
  local length, owed = nil, {}
  for i = 1, n do
    if cbs[i] == '1' then
      length = length or redis.call('XLEN', KEYS[3])
      if backlogMax > 0 and length >= backlogMax then
        guardAll()
        return {'backlog', tostring(length), ''}
      end
      -- A lane's own count is asked only once the stream is that long: a count that drifted high cannot refuse a short stream.
      if laneBacklogMax > 0 and length >= laneBacklogMax then
        local lane = lanes[i]
        if owed[lane] == nil then owed[lane] = tonumber(redis.call('HGET', KEYS[3] .. ':owed', lane) or '0') end
        if owed[lane] >= laneBacklogMax then
          guardAll()
          return {'backlog', tostring(owed[lane]), lane}
        end
      end
    end
  end
end
local states, before = {}, {}
local conflict = false
local seen = {}
for i = 1, n do
  -- The same id twice on two lanes is a conflict too.
  if inMulti and seen[ids[i]] and seen[ids[i]] ~= lanes[i] then conflict = true end
  seen[ids[i]] = lanes[i]
  local existing = redis.call('HMGET', sp .. ':card:' .. ids[i], 'state', 'lane')
  if existing[1] then
    states[i], before[i] = existing[1], existing[2] or ''
    if inMulti and before[i] ~= lanes[i] then conflict = true end
  end
end
-- Each lane's bounds on open cards (ARGV 11): the new ids a lane would take, and their card JSON
-- bytes, against the cards it holds in its queued, running and blocked indexes (each card is in
-- exactly one index of its state) and its count of their bytes (keys.openBytes). A lane that holds
-- no open card holds no bytes, whatever its count says: a count that drifted heals there.
local emptyLanes = {}
if inMulti and not conflict then
  local caps, byteCaps = {}, {}
  for lane, max, maxBytes in string.gmatch(ARGV[11] or '', '(%S+) (%d+) (%d+)') do caps[lane], byteCaps[lane] = tonumber(max), tonumber(maxBytes) end
  local adding, addingBytes, order, counted = {}, {}, {}, {}
  for i = 1, n do
    if not states[i] and not counted[ids[i]] and caps[lanes[i]] then
      counted[ids[i]] = true
      if not adding[lanes[i]] then adding[lanes[i]], addingBytes[lanes[i]] = 0, 0; order[#order + 1] = lanes[i] end
      adding[lanes[i]], addingBytes[lanes[i]] = adding[lanes[i]] + 1, addingBytes[lanes[i]] + #jsons[i]
    end
  end
  for _, lane in ipairs(order) do
    local base = sp .. ':lane:' .. lane
    local open = redis.call('ZCARD', base .. ':cards:queued') + redis.call('ZCARD', base .. ':cards:running') + redis.call('ZCARD', base .. ':blocked')
    if open + adding[lane] > caps[lane] then
      guardAll()
      return {'full', lane, tostring(open), tostring(adding[lane]), 'cards'}
    end
    -- Read only: a write here, before the record's HSET, would let the script past Redis's maxmemory
    -- (Redis refuses a script's first write that grows memory, not one after another write).
    local bytes = 0
    if open == 0 then emptyLanes[lane] = true else bytes = tonumber(redis.call('GET', base .. ':open-bytes') or '0') end
    if bytes + addingBytes[lane] > byteCaps[lane] then
      guardAll()
      return {'full', lane, tostring(bytes), tostring(addingBytes[lane]), 'bytes'}
    end
  end
end
local out, superseded = {}, {}
local made, madeHere, hasBlocked = {}, {}, {}
-- The new ids of each lane, for the per-lane writes after the loop (one call each, not one per card).
local newIds, newBytes, newLanes = {}, {}, {}
for i = 1, n do
  local id, lane = ids[i], lanes[i]
  -- The job is written here, or (writeJobs off) added by BullMQ after this script.
  local here = jobOpts[i] ~= ''
  -- An id made earlier in this batch is answered with the lane it was made on.
  local again = not states[i] and made[id]
  if again then states[i], before[i] = 'queued', made[id] end
  if inMulti and (conflict or (states[i] and states[i] ~= 'queued')) then
    local job = qp .. ':' .. lane .. ':' .. id
    if not here and redis.call('EXISTS', job) == 0 then
      redis.call('HSET', job, 'lanesEnqueueGuard', '1')
      redis.call('SADD', KEYS[2], job)
    end
  elseif not states[i] then
    made[id], madeHere[id] = lane, here
    local card = sp .. ':card:' .. id
    redis.call('HSET', card, 'card', jsons[i], 'lane', lane, 'state', 'queued', 'attempts', '0',
      'infraRetries', '0', 'createdAt', at, 'updatedAt', at, 'callback', cbs[i])
    -- The keys on the record too, so the scale endpoint's scan reads them without the card's JSON (key-limit-script.ts).
    if cks[i] ~= '' then redis.call('HSET', card, 'concurrencyKey', cks[i]) end
    if sups[i] ~= '' then redis.call('HSET', card, 'supersedeKey', sups[i]) end
    redis.call('RPUSH', card .. ':history', ARGV[3])
    local fresh = newIds[lane]
    if not fresh then fresh = {}; newIds[lane] = fresh; newBytes[lane] = 0; newLanes[#newLanes + 1] = lane end
    fresh[#fresh + 1] = id
    newBytes[lane] = newBytes[lane] + #jsons[i]
    -- A lane with no blocked card (the usual case) is asked once per batch, not once per card.
    local blocked = sp .. ':lane:' .. lane .. ':blocked'
    if hasBlocked[lane] == nil then hasBlocked[lane] = redis.call('EXISTS', blocked) == 1 end
    if hasBlocked[lane] then redis.call('ZREM', blocked, id) end
    appendEvent(KEYS[1], sp .. ':lane:' .. lane .. ':events', KEYS[4], ARGV[1],
      '{"type":"card.queued","at":"' .. at .. '","lane":"' .. lane .. '","cardId":"' .. id .. '"}')
    if here then writeJob(qp, lane, id, jsons[i], jobOpts[i], prios[i], ARGV[8]) end
    if sups[i] ~= '' then
      -- The newest card of its supersede key (keys.supersedeLatest): the one before it is answered, to be cancelled.
      local latest = sp .. ':lane:' .. lane .. ':supersede:' .. sups[i] .. ':latest'
      local previous = redis.call('GET', latest)
      redis.call('SET', latest, id, 'PX', ARGV[10])
      if previous and previous ~= id then superseded[i] = previous end
    end
  elseif here and not (again and not madeHere[id]) then
    -- Queued: its job again if it is gone (a repair), else a duplicate, as BullMQ's add answers one.
    -- An id whose job BullMQ adds after this script (made earlier in the batch) is left to that add.
    writeJob(qp, lane, id, jsons[i], jobOpts[i], prios[i], ARGV[8])
  end
  out[i] = states[i] and (states[i] .. '/' .. before[i]) or ''
  superseded[i] = superseded[i] or ''
end
-- Variadic calls in slices: unpack puts every element on Lua's C stack, which holds about 8,000.
local SLICE = 500
for _, lane in ipairs(newLanes) do
  local ids = newIds[lane]
  -- The card JSON bytes its open cards hold (keys.openBytes), given back when each ends (card-script.ts).
  -- A lane that held no open card starts its count afresh (a drifted one heals).
  if emptyLanes[lane] then redis.call('SET', sp .. ':lane:' .. lane .. ':open-bytes', newBytes[lane])
  else redis.call('INCRBY', sp .. ':lane:' .. lane .. ':open-bytes', newBytes[lane]) end
  for from = 1, #ids, SLICE do
    local to = math.min(from + SLICE - 1, #ids)
    -- Its lane's listing index of queued cards (keys.cardIndex in names.ts), scored by this time.
    local scored = {}
    for j = from, to do scored[#scored + 1] = ARGV[8]; scored[#scored + 1] = ids[j] end
    redis.call('ZADD', sp .. ':lane:' .. lane .. ':cards:queued', unpack(scored))
    -- An earlier card of such an id expired with its job (retention, card-script.ts) and may have left
    -- the id in BullMQ's finished sets: out, before BullMQ's age or count trim removes the new job by it.
    redis.call('ZREM', qp .. ':' .. lane .. ':completed', unpack(ids, from, to))
    redis.call('ZREM', qp .. ':' .. lane .. ':failed', unpack(ids, from, to))
  end
end
finishJobs()
return {conflict and 'conflict' or 'ok', table.concat(out, ','), table.concat(superseded, ',')}
`;

/** KEYS: 1 guard set. Deletes the guards (only hashes still marked as guards) and the set. */
const RELEASE_LUA = `
local guarded = redis.call('SMEMBERS', KEYS[1])
for _, key in ipairs(guarded) do
  if redis.call('HGET', key, 'lanesEnqueueGuard') then redis.call('DEL', key) end
end
redis.call('DEL', KEYS[1])
return #guarded
`;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesEnqueue(...args: Array<string | number>): Result<unknown, Context>;
    lanesEnqueueRelease(...args: Array<string | number>): Result<unknown, Context>;
  }
}

export const ENQUEUE_SCRIPT = 'lanesEnqueue';
export const ENQUEUE_RELEASE_SCRIPT = 'lanesEnqueueRelease';

const SCRIPTS = {
  [ENQUEUE_SCRIPT]: { lua: ENQUEUE_LUA },
  [ENQUEUE_RELEASE_SCRIPT]: { numberOfKeys: 1, lua: RELEASE_LUA },
};

export function defineEnqueueScripts(redis: Redis): void {
  defineScriptsOnce(redis, SCRIPTS);
}

/** `enqueue`: records and jobs, with guards and whole-batch refusal; `each`: the records alone. */
export type EnqueueMode = 'enqueue' | 'each';

/**
 * The arguments of `lanesEnqueue` (numkeys first). `jobOpts[i]`: the options of card i's job when
 * the script is to write it (bullmq-job-layout.ts), '' or none when not; `each` mode writes no job.
 */
export function enqueueArgs(
  cards: readonly Card[],
  nowMs: number,
  eventStreamMaxLen: number,
  mode: EnqueueMode,
  jobOpts: readonly string[] = [],
  callbackBacklogMax = 0,
  openCardsMax: ReadonlyMap<string, OpenBounds> = new Map(),
  laneCallbackBacklogMax = 0,
): Array<string | number> {
  const at = new Date(nowMs).toISOString();
  let batch = '';
  for (const [i, card] of cards.entries()) {
    batch += `${card.id}\t${card.lane}\t${card.callbackUrl ? '1' : '0'}\t${card.priority}\t${jobOpts[i] ?? ''}\t${card.concurrencyKey ?? ''}\t${card.supersedeKey ?? ''}\t${JSON.stringify(card)}\n`;
  }
  const entry = JSON.stringify({ at, state: 'queued', attempt: 0, message: 'enqueued' });
  return [
    4,
    keys.events(),
    keys.enqueueGuards(),
    keys.callbacks(),
    keys.laneEventsSince(),
    eventStreamMaxLen,
    at,
    entry,
    STORE_PREFIX,
    QUEUE_PREFIX,
    batch,
    mode,
    nowMs,
    callbackBacklogMax,
    SUPERSEDE_LATEST_TTL_MS,
    [...openCardsMax].map(([lane, max]) => `${lane} ${max.cards} ${max.bytes}`).join(' '),
    laneCallbackBacklogMax,
  ];
}

/**
 * What each card was before this enqueue: undefined when it is new. `callbackBacklog`: the batch
 * was refused whole, the callback stream holding this many entries.
 */
export type EnqueueReply = {
  conflict: boolean;
  callbackBacklog?: number;
  /** With callbackBacklog: the lane whose own count of owed callbacks is at its bound (else the stream is at its bound). */
  callbackBacklogLane?: string;
  /** The batch was refused whole: it would take `lane` past its bound on open cards (`unit` cards) or on their bytes. */
  laneFull?: { lane: string; open: number; adding: number; unit: 'cards' | 'bytes' };
  before: Array<{ state: z.infer<typeof CardStateSchema>; lane: string } | undefined>;
  /** Per card: the card of its supersede key it replaced as newest, to be cancelled. */
  supersedes: Array<string | undefined>;
};

const ReplySchema = z.union([
  z.tuple([z.literal('backlog'), z.string(), z.string()]),
  z.tuple([z.literal('full'), z.string(), z.string(), z.string(), z.enum(['cards', 'bytes'])]),
  z.tuple([z.enum(['ok', 'conflict']), z.string(), z.string()]),
]);

export function parseEnqueueReply(raw: unknown, count: number): EnqueueReply {
  const reply = ReplySchema.parse(raw);
  if (reply[0] === 'backlog') {
    return { conflict: false, callbackBacklog: Number(reply[1]), ...(reply[2] !== '' ? { callbackBacklogLane: reply[2] } : {}), before: [], supersedes: [] };
  }
  if (reply[0] === 'full') return { conflict: false, laneFull: { lane: reply[1], open: Number(reply[2]), adding: Number(reply[3]), unit: reply[4] }, before: [], supersedes: [] };
  const [status, states, replaced] = reply;
  const parts = states.split(',');
  const supersedes = replaced.split(',').map((id) => (id === '' ? undefined : id));
  if (parts.length !== count || supersedes.length !== count) throw new Error(`enqueue script answered ${parts.length} states for ${count} cards`);
  const before: EnqueueReply['before'] = parts.map((part) => {
    if (part === '') return undefined;
    const slash = part.indexOf('/');
    return { state: CardStateSchema.parse(part.slice(0, slash)), lane: part.slice(slash + 1) };
  });
  return { conflict: status === 'conflict', before, supersedes };
}
