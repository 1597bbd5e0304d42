import type { Redis, Result } from 'ioredis';
import { z } from 'zod';
import { CardStateSchema, agentLimits, defaults, type CardState } from '@lanes/contracts';
import { isCallbackEvent } from './callback-events.js';
import type { CardWriter, RenderedMove } from './card-move.js';
import { WRITE_JOB_LUA } from './bullmq-job-layout.js';
import { endedJobDataFor } from './ended-job-data.js';
import { EVENT_STREAM_MAX_LEN } from './event-log.js';
import { APPEND_EVENT_LUA } from './lane-event-streams.js';
import { KEY_PARK_FIELDS } from './key-limit-script.js';
import { QUEUE_PREFIX, cardIndexPrefix, keys, queueName } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesCardWrite(...args: Array<string | number>): Result<unknown, Context>;
    lanesCardFenced(...args: Array<string | number>): Result<unknown, Context>;
    lanesCardCancel(...args: Array<string | number>): Result<unknown, Context>;
  }
}

/** The card hash field that keeps a cancel request for whichever run holds the card, now or next. */
export const CANCEL_REQUESTED_FIELD = 'cancelRequestedAt';
/** Why a cancel was asked for, when it was not a board's plain cancel (`superseded by <id>`): the cancelled move says it. */
export const CANCEL_REASON_FIELD = 'cancelReason';

/**
 * The one writer of card moves (a new record is `lanesEnqueue`'s, in enqueue-script.ts). In one
 * atomic step it checks the move against the legal table (the caller passes the legal sources of
 * the target), checks the writer's run token, and writes the record, the history entry, the
 * blocked index and the event together, or nothing at all.
 *
 * KEYS: 1 card hash, 2 history, 3 lane's blocked set, 4 event stream, 5 BullMQ lock of the card's
 *       job, 6 crash-suspect run tokens, 7 fenced run tokens, 8 callback stream, 9 BullMQ's hash
 *       of the card's job, 10 its log list, 11 the lane's BullMQ active list, 12 its stalled set,
 *       13 the card's output stream (job-log-append.ts), 14 the card JSON bytes of the lane's open
 *       cards (keys.openBytes: a move that ends the card takes its bytes off, a retry puts them back),
 *       15 the lane's event stream and 16 the lanes-since mark (lane-event-streams.ts)
 * ARGV: 1 target state, 2 legal sources (comma-separated), 3 writer (run | board | board-if-run),
 *       4 token, 5 fields to set (JSON object of strings), 6 fields to delete (JSON array),
 *       7 history entry (JSON), 8 event (JSON), 9 the move's time (epoch ms: the listing score),
 *       10 event stream max length, 11 card id, 12 '1' if a board hears of this event type,
 *       13 the lane's terminal retention (ms), 14 the most history entries kept (≥ 2), 15 the lock
 *       duration (ms) a finished run takes a lapsed lock back for ('0': it may not), 16 the lane's
 *       listing-index prefix (cardIndexPrefix), 17 a retry's job: '' (no job is touched: every
 *       move but a retry), 'clear' (the finished job is removed; the caller adds the new one
 *       through BullMQ), or the new job's options (JSON: the finished job is replaced here, as
 *       BullMQ's add writes one, WRITE_JOB_LUA), 18 BullMQ's key prefix, 19 the lane, 20 the
 *       new job's priority, 21 for a terminal move, the job's data from now on (ended-job-data.ts),
 *       or '' to leave the job's data as it is, 22 for a run's move into running, the lock duration
 *       (ms) its lock is renewed for in the same step ('0': it is not), 23 the most finished cards
 *       the lane keeps ('0': no count bound; see Retention)
 *
 * Listing indexes (names.ts `cardIndex`, `blockedReasonIndex`; read by card-page-script.ts): every
 * move takes the card out of its old state's sorted set and puts it in the new one's, and in and
 * out of its lane's blocked-reason set, scored by the move's time, or by the card's previous
 * score when that is later (writers' clocks differ): a card's score never goes down. The blocked
 * set is the blocked state's index. A move into a terminal state's set also trims from it the
 * entries older than the lane's retention (their cards have expired) and gives the set itself the
 * retention as its expiry, so a set outlives its newest card by nothing.
 *
 * Retention: a move to a terminal state (done, failed, cancelled) sets the expiry of every key the
 * card owns: its record and history, and its BullMQ job hash and log list (BullMQ's finishing of
 * the job rewrites fields, which keeps the expiry; its data, the card's second copy, becomes the
 * ended-job stub of ARGV 21, when the job still exists), and its output stream, which gets an end entry
 * (`end` the state, `t` the output bytes written so far) so a reader knows the run's output is all
 * there; a stream that holds only that entry (the card printed nothing) expires after
 * CARD_OUTPUT_END_GRACE_MS instead. Its crash-suspect and fenced-run sets are
 * deleted, and a terminal card is in no blocked index. A move out of a terminal state (a retry)
 * persists them again. A lane keeps at most ARGV 23 finished cards: a terminal move that takes the
 * lane past it removes its oldest finished cards (the lowest scores across its done, failed and
 * cancelled indexes; at most RETAINED_EVICTIONS_PER_MOVE per move) with everything they own: record,
 * history, output stream, job and job log. An index entry whose record is gone, on another lane or
 * in another state (an expired card, a reused id) only leaves its index. BullMQ's completed and failed sets, which hold only the id, are trimmed by
 * the job's removeOnComplete/removeOnFail (job-options.ts).
 *
 * A retry (ARGV 17 not '') is refused as 'busy', with nothing written, while the card's job is not
 * finished: its lock is held, or its hash exists outside BullMQ's completed and failed sets (a run
 * still ending it, or the stalled check handing it on). Otherwise the finished job (hash, and its
 * id in the finished sets) goes and the new one is written in the same step: the card is queued
 * if and only if its job is waiting. The job's log list stays, with both runs' output.
 *
 * History cap: past ARGV 14 entries, the history keeps its first entry (the enqueue) and its
 * newest ARGV 14 − 1; the entries dropped are counted in the hash field `historyDropped`. A
 * terminal entry is the newest entry of its card, so the cap never drops it.
 *
 * Under Redis's maxmemory (noeviction), Redis refuses the script's first write that may grow
 * memory, unless a write came before it; either way the script writes all or nothing.
 *
 * The event also goes to the callback stream when a board hears of it and the card has a
 * callbackUrl (hash field `callback`, set by `lanesEnqueue` when the record is made), so the dispatcher never wakes for cards
 * nobody listens to. A record written before that field existed is asked its card JSON. That stream
 * is not capped here: only the dispatcher trims it, past what it has acknowledged (callback-stream.ts).
 *
 * A run's token must be the value of BullMQ's lock on the job: that is the fence, checked first.
 * A run whose lock lapsed (Redis away longer than the lock, a partition) writes only a move out of
 * `running` that it offers to reclaim for (a finished agent run), and only if no other run has
 * taken the card since (evaluateRunFence): then it takes the lock back in the same step. Otherwise
 * its write is stale, even where the move itself is no longer legal (a late done after another
 * run's done). Out of `running`, the token must also be the card's run.
 * Moving into `running` over another run's token is a takeover; the old token becomes a crash
 * suspect unless its worker already said it fenced itself (see `lanesCardFenced`).
 */
const WRITE_LUA = `${WRITE_JOB_LUA}${APPEND_EVENT_LUA}
local to = ARGV[1]
local function terminal(s) return s == 'done' or s == 'failed' or s == 'cancelled' end
local function stateIndex(s) if s == 'blocked' then return KEYS[3] end return ARGV[16] .. s end
-- The listing indexes, out of the old state's (and blocked reason's) and into the new ones.
local function index(from, set)
  local id, old, new = ARGV[11], stateIndex(from), stateIndex(to)
  local score = tonumber(ARGV[9])
  local prev = tonumber(redis.call('ZSCORE', old, id) or '0')
  if prev > score then score = prev end
  if from == 'blocked' then
    local reason = redis.call('HGET', KEYS[1], 'blockedReason')
    if reason then redis.call('ZREM', KEYS[3] .. ':' .. reason, id) end
  end
  if old ~= new then redis.call('ZREM', old, id) end
  redis.call('ZADD', new, score, id)
  if to == 'blocked' then
    if set.blockedReason then redis.call('ZADD', KEYS[3] .. ':' .. set.blockedReason, score, id) end
  else
    redis.call('ZREM', KEYS[3], id)
  end
  if terminal(to) then
    redis.call('ZREMRANGEBYSCORE', new, '-inf', '(' .. tostring(tonumber(ARGV[9]) - tonumber(ARGV[13])))
    redis.call('PEXPIRE', new, ARGV[13])
  end
end
-- The lane's oldest finished cards past its count bound (ARGV 23), the card being moved never among them.
local function evictOldest()
  local max = tonumber(ARGV[23]) or 0
  if max <= 0 then return end
  local finished = {ARGV[16] .. 'done', ARGV[16] .. 'failed', ARGV[16] .. 'cancelled'}
  local total = 0
  for _, ix in ipairs(finished) do total = total + redis.call('ZCARD', ix) end
  local cardPrefix, jobPrefix = string.sub(KEYS[1], 1, #KEYS[1] - #ARGV[11]), ARGV[18] .. ':' .. ARGV[19] .. ':'
  local evicted = 0
  while total > max and evicted < ${defaults.RETAINED_EVICTIONS_PER_MOVE} do
    local oldest, from, best = nil, nil, nil
    for _, ix in ipairs(finished) do
      local first = redis.call('ZRANGE', ix, 0, 0, 'WITHSCORES')
      if first[1] and (best == nil or tonumber(first[2]) < best) then oldest, from, best = first[1], ix, tonumber(first[2]) end
    end
    if oldest == nil or oldest == ARGV[11] then return end
    redis.call('ZREM', from, oldest)
    local card = cardPrefix .. oldest
    local held = redis.call('HMGET', card, 'state', 'lane')
    if held[2] == ARGV[19] and held[1] and stateIndex(held[1]) == from then
      redis.call('DEL', card, card .. ':history', card .. ':output', card .. ':crash-suspects', card .. ':fenced-runs', jobPrefix .. oldest, jobPrefix .. oldest .. ':logs')
      redis.call('ZREM', jobPrefix .. 'completed', oldest)
      redis.call('ZREM', jobPrefix .. 'failed', oldest)
    end
    total, evicted = total - 1, evicted + 1
  end
end
local function apply(from)
  local set = cjson.decode(ARGV[5])
  index(from, set)
  -- A card parked over its key's limit (key-limit-script.ts) is parked no more once it moves on.
  if to ~= 'queued' then
    local park = redis.call('HMGET', KEYS[1], 'keyWaiting', 'keyParked')
    if park[1] then redis.call('ZREM', park[1], ARGV[11]) end
    if park[2] then redis.call('ZREM', park[2], ARGV[11]) end
    if park[1] or park[2] then redis.call('HDEL', KEYS[1], '${KEY_PARK_FIELDS.join("', '")}') end
  end
  local flat = {}
  for k, v in pairs(set) do flat[#flat + 1] = k; flat[#flat + 1] = v end
  if #flat > 0 then redis.call('HSET', KEYS[1], unpack(flat)) end
  local del = cjson.decode(ARGV[6])
  if #del > 0 then redis.call('HDEL', KEYS[1], unpack(del)) end
  local len = redis.call('RPUSH', KEYS[2], ARGV[7])
  local cap = tonumber(ARGV[14])
  if len > cap then
    local first = redis.call('LINDEX', KEYS[2], 0)
    redis.call('LTRIM', KEYS[2], len - cap + 1, -1)
    redis.call('LPUSH', KEYS[2], first)
    redis.call('HINCRBY', KEYS[1], 'historyDropped', len - cap)
  end
  appendEvent(KEYS[4], KEYS[15], KEYS[16], ARGV[10], ARGV[8])
  if ARGV[12] == '1' then
    local cb = redis.call('HGET', KEYS[1], 'callback')
    if not cb then
      local raw = redis.call('HGET', KEYS[1], 'card')
      cb = (raw and type(cjson.decode(raw).callbackUrl) == 'string') and '1' or '0'
    end
    if cb == '1' then
      -- The entry names its lane, so the lane's count of owed callbacks (keys.callbacksOwed) can be given back at its ack.
      redis.call('XADD', KEYS[8], '*', 'e', ARGV[8], 'l', ARGV[19])
      redis.call('HINCRBY', KEYS[8] .. ':owed', ARGV[19], 1)
    end
  end
end
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return {'not-found', ''} end
local writer, token = ARGV[3], ARGV[4]
-- The run fence (evaluateRunFence in run-fence.ts, row by row). A run without the lock is stale
-- whatever it asks for, unless the lock lapsed and no other run has taken the card since: a
-- finished run then takes the lock back and writes.
local reclaim = false
if writer == 'run' then
  local lock = redis.call('GET', KEYS[5])
  if lock ~= token then
    if lock or ARGV[15] == '0' or to == 'running' or state ~= 'running'
      or (redis.call('HGET', KEYS[1], 'runToken') or '') ~= token
      or not redis.call('LPOS', KEYS[11], ARGV[11])
      or redis.call('HEXISTS', KEYS[1], '${CANCEL_REQUESTED_FIELD}') == 1 then return {'stale', state} end
    reclaim = true
  end
end
local legal = false
for s in string.gmatch(ARGV[2], '[^,]+') do if s == state then legal = true end end
if not legal then return {'illegal', state} end
local job = ARGV[17]
local jq = ARGV[18] .. ':' .. ARGV[19] .. ':'
if job ~= '' then
  if redis.call('EXISTS', KEYS[5]) == 1 then return {'busy', state} end
  if redis.call('EXISTS', KEYS[9]) == 1 and not redis.call('ZSCORE', jq .. 'completed', ARGV[11])
    and not redis.call('ZSCORE', jq .. 'failed', ARGV[11]) then return {'busy', state} end
end
local current = redis.call('HGET', KEYS[1], 'runToken') or ''
if writer == 'run' then
  if state == 'running' and to ~= 'running' and current ~= token then return {'stale', state} end
elseif state == 'running' then
  if writer ~= 'board-if-run' or current ~= token then return {'stale', state} end
end
local takeover = '0'
if to == 'running' then
  if writer == 'run' and ARGV[22] ~= '0' then
    -- The run's first lease renewal, as BullMQ's extendLock writes it: one command fewer per card.
    redis.call('SET', KEYS[5], token, 'PX', ARGV[22])
    redis.call('SREM', KEYS[12], ARGV[11])
  end
  if state == 'running' and current ~= token then
    takeover = '1'
    if redis.call('SISMEMBER', KEYS[7], current) == 0 then redis.call('SADD', KEYS[6], current) end
  end
  redis.call('HSET', KEYS[1], 'runToken', token)
else
  redis.call('HDEL', KEYS[1], 'runToken')
end
if reclaim then
  -- As BullMQ's extendLock does: the lock again, and off the stalled check's list.
  redis.call('SET', KEYS[5], token, 'PX', ARGV[15])
  redis.call('SREM', KEYS[12], ARGV[11])
end
apply(state)
local suspects = redis.call('SCARD', KEYS[6])
if terminal(to) then
  -- A finished card has no more takeovers to judge, and everything else it owns expires.
  redis.call('DEL', KEYS[6], KEYS[7])
  local written = '0'
  local last = redis.call('XREVRANGE', KEYS[13], '+', '-', 'COUNT', 1)[1]
  if last then
    for i = 1, #last[2], 2 do if last[2][i] == 't' then written = last[2][i + 1] end end
  end
  redis.call('XADD', KEYS[13], '*', 'end', to, 't', written)
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[9], KEYS[10], KEYS[13]}) do redis.call('PEXPIRE', key, ARGV[13]) end
  -- The record keeps the card: the job need not keep it too for the retention (BullMQ's updateData).
  if ARGV[21] ~= '' and redis.call('EXISTS', KEYS[9]) == 1 then redis.call('HSET', KEYS[9], 'data', ARGV[21]) end
  -- A stream of the end entry alone (no output): kept for readers attached at the end, then gone.
  if not last then redis.call('PEXPIRE', KEYS[13], math.min(tonumber(ARGV[13]), ${agentLimits.CARD_OUTPUT_END_GRACE_MS})) end
  evictOldest()
  if not terminal(state) and redis.call('DECRBY', KEYS[14], redis.call('HSTRLEN', KEYS[1], 'card')) <= 0 then redis.call('DEL', KEYS[14]) end
elseif terminal(state) then
  for _, key in ipairs({KEYS[1], KEYS[2], KEYS[9], KEYS[10], KEYS[13]}) do redis.call('PERSIST', key) end
  redis.call('INCRBY', KEYS[14], redis.call('HSTRLEN', KEYS[1], 'card'))
end
if job ~= '' then
  -- A retry: the finished job goes, and (unless BullMQ adds it) the new one under the same id.
  redis.call('DEL', KEYS[9])
  redis.call('ZREM', jq .. 'completed', ARGV[11])
  redis.call('ZREM', jq .. 'failed', ARGV[11])
  if job ~= 'clear' then
    writeJob(ARGV[18], ARGV[19], ARGV[11], redis.call('HGET', KEYS[1], 'card'), job, tonumber(ARGV[20]) or 0, ARGV[9])
    finishJobs()
  end
end
-- A cancel kept on the card: the run that moved it to running is to stop before it starts anything.
local cancel = (to == 'running' and redis.call('HEXISTS', KEYS[1], '${CANCEL_REQUESTED_FIELD}') == 1) and '1' or '0'
return {'ok', to, takeover, tostring(suspects), redis.call('HGET', KEYS[1], 'infraRetries') or '0', cancel, reclaim and '1' or '0'}
`;

/**
 * A worker that fenced itself (its run was alive but lost its lock) says so once it can, so the
 * takeover its fence caused is not held against the card as a crash. A finished (or expired) card
 * judges no more takeovers: nothing is kept for it, so no set outlives the card's retention.
 * KEYS: 1 crash suspects, 2 fenced runs, 3 card hash. ARGV: 1 token.
 */
const FENCED_LUA = `
local state = redis.call('HGET', KEYS[3], 'state')
if not state or state == 'done' or state == 'failed' or state == 'cancelled' then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
return redis.call('SREM', KEYS[1], ARGV[1])
`;

/**
 * A cancel of a card that may be running: kept on the card, then published. Pub/sub keeps nothing
 * for a subscriber that is reconnecting, so the worker also reads the request each heartbeat.
 * A finished card is left as it is. KEYS: 1 card hash. ARGV: 1 requested at, 2 channel, 3 card id,
 * 4 the reason ('' for none). Answers the card's state, or '' when there is no card.
 */
const CANCEL_LUA = `
local state = redis.call('HGET', KEYS[1], 'state')
if not state then return '' end
if state == 'done' or state == 'failed' or state == 'cancelled' then return state end
redis.call('HSET', KEYS[1], '${CANCEL_REQUESTED_FIELD}', ARGV[1])
if ARGV[4] ~= '' then redis.call('HSET', KEYS[1], '${CANCEL_REASON_FIELD}', ARGV[4]) end
redis.call('PUBLISH', ARGV[2], ARGV[3])
return state
`;

const SCRIPTS = {
  lanesCardWrite: { numberOfKeys: 16, lua: WRITE_LUA },
  lanesCardFenced: { numberOfKeys: 3, lua: FENCED_LUA },
  lanesCardCancel: { numberOfKeys: 1, lua: CANCEL_LUA },
};

export function defineCardScripts(redis: Redis): void {
  defineScriptsOnce(redis, SCRIPTS);
}

const Count = z.coerce.number().int().nonnegative();

/** What the script answered, decoded rather than trusted. */
export const ScriptReplySchema = z.union([
  /**
   * ok, the new state, whether it was a takeover, crash suspects, the card's infra retries (so a
   * run need not read the record), for a move to running, whether a cancel waits on the card,
   * and whether the run took a lapsed lock back to write.
   */
  z.tuple([z.literal('ok'), CardStateSchema, z.enum(['0', '1']), Count, Count, z.enum(['0', '1']), z.enum(['0', '1'])]),
  z.tuple([z.literal('not-found'), z.literal('')]),
  z.tuple([z.enum(['illegal', 'stale']), CardStateSchema]),
  /** A retry while the card's job is not finished yet: nothing written. */
  z.tuple([z.literal('busy'), CardStateSchema]),
]);
export type ScriptReply = z.infer<typeof ScriptReplySchema>;

/** One call of `lanesCardWrite`: the move, who writes it, and the lane's limits. */
export interface WriteScriptInput {
  card: { id: string; lane: string };
  to: CardState;
  /** The states the move is legal from (`legalSourcesOf(to)`). */
  sources: readonly CardState[];
  writer: CardWriter;
  rendered: RenderedMove;
  /** The move's time: the rendered move's `at`, and its score in the listing indexes. */
  nowMs: number;
  retentionMs: number;
  /** The most finished cards the lane keeps (retention.maxCards); 0: no count bound. */
  retainedMax: number;
  historyMaxEntries: number;
  /**
   * A retry's job: `clear` removes the finished job (the caller then adds the new one through
   * BullMQ); `write` replaces it with a job of these options (bullmq-job-layout.ts) in the same step.
   */
  job?: { kind: 'clear' } | { kind: 'write'; opts: string; priority: number };
  /**
   * Whether a terminal move replaces the job's data with the ended-job stub: only under the BullMQ
   * whose job layout lanes checked (JOB_LAYOUT_WRITABLE), like every write of lanes' into a job.
   */
  trimEndedJob: boolean;
}

/** The keys and arguments of `lanesCardWrite`, in the order WRITE_LUA documents. */
export function writeScriptArgs(input: WriteScriptInput): Array<string | number> {
  const { card, rendered: r, writer } = input;
  return [
    keys.card(card.id),
    keys.history(card.id),
    keys.blocked(card.lane),
    keys.events(),
    keys.jobLock(card.lane, card.id),
    keys.crashSuspects(card.id),
    keys.fencedRuns(card.id),
    keys.callbacks(),
    keys.job(card.lane, card.id),
    keys.jobLogs(card.lane, card.id),
    keys.jobActive(card.lane),
    keys.jobStalled(card.lane),
    keys.cardOutput(card.id),
    keys.openBytes(card.lane),
    keys.laneEvents(card.lane),
    keys.laneEventsSince(),
    input.to,
    input.sources.join(','),
    writer.kind,
    writer.kind === 'board' ? '' : writer.token,
    JSON.stringify(r.set),
    JSON.stringify(r.del),
    JSON.stringify(r.entry),
    JSON.stringify(r.event),
    input.nowMs,
    EVENT_STREAM_MAX_LEN,
    card.id,
    isCallbackEvent(r.event.type) ? '1' : '0',
    input.retentionMs,
    input.historyMaxEntries,
    writer.kind === 'run' ? (writer.reclaimLockMs ?? 0) : 0,
    cardIndexPrefix(card.lane),
    input.job === undefined ? '' : input.job.kind === 'clear' ? 'clear' : input.job.opts,
    QUEUE_PREFIX,
    queueName(card.lane),
    input.job?.kind === 'write' ? input.job.priority : 0,
    input.trimEndedJob ? endedJobDataFor(card.id, input.to) : '',
    writer.kind === 'run' && input.to === 'running' ? (writer.renewLockMs ?? 0) : 0,
    input.retainedMax,
  ];
}
