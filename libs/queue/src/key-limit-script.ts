import type { Redis, Result } from 'ioredis';
import { KEY_LIMIT_WAITING, SUPERSEDE_WAITING } from '@lanes/contracts';
import { JOB_LAYOUT_WRITABLE, WAIT_FRONT_LUA } from './bullmq-job-layout.js';
import { QUEUE_PREFIX, STORE_PREFIX, keys, queueName } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesKeyAdmit(...args: Array<string | number>): Result<unknown, Context>;
    lanesKeyRelease(...args: Array<string | number>): Result<unknown, Context>;
    lanesKeyRecheck(...args: Array<string | number>): Result<unknown, Context>;
    lanesKeyWaitFront(...args: Array<string | number>): Result<unknown, Context>;
    lanesKeyHeldBack(...args: Array<string | number>): Result<unknown, Context>;
  }
}

/**
 * The card hash fields a parked card carries (its state stays `queued`): the detail the record
 * shows, the two sorted sets it waits in, and when it first waited (its place in its key's line,
 * kept across re-parks). The admission clears them; so does every move of the card to a state
 * other than queued (WRITE_LUA in card-script.ts), which also takes it out of both sets.
 */
export const KEY_PARK_FIELDS = ['stateDetail', 'keyWaiting', 'keyParked', 'keyWaitingSince'] as const;

/**
 * Lua: `others(set, self, lockPrefix)` counts the members of a key's running set other than `self`
 * whose BullMQ job lock (`<lockPrefix><id>:lock`, the lock the run fence reads) is held, and drops
 * the rest: a card whose lock is gone runs nowhere (its worker crashed and the stalled check handed
 * the job on, or it finished without its release). Answers the count and whether `self` is a member.
 */
const COUNT_LUA = `
local function others(set, self, lockPrefix)
  local n, counted = 0, false
  for _, m in ipairs(redis.call('SMEMBERS', set)) do
    if m == self then counted = true
    elseif redis.call('EXISTS', lockPrefix .. m .. ':lock') == 1 then n = n + 1
    else redis.call('SREM', set, m) end
  end
  return n, counted
end
`;

/**
 * The admission of a taken card whose lane limits its key: evaluateKeyAdmission (libs/supervision
 * key-admission.ts) row by row, the count and the check in one step, so two workers taking cards of
 * one key at once cannot both see room for one.
 * KEYS: 1 card hash, 2 BullMQ lock of the card's job, 3 the key's running set, 4 its waiting set,
 *       5 the lane's parked set.
 * ARGV: 1 run token, 2 card id, 3 maxRunningPerKey, 4 now (ms), 5 the lane's job key prefix,
 *       6 the state detail of a parked card.
 * Answers {decision, others running, '1' if counted already}; decision is admit, park, stale (the
 * run does not hold the job) or no-record (a job put on the queue through BullMQ alone: the caller
 * makes the record and asks again). A park keeps the card's first waiting time, so a card woken
 * and beaten to the place keeps its place in line.
 */
const ADMIT_LUA = `${COUNT_LUA}
local id = ARGV[2]
if redis.call('GET', KEYS[2]) ~= ARGV[1] then return {'stale', '0', '0'} end
if redis.call('EXISTS', KEYS[1]) == 0 then return {'no-record', '0', '0'} end
local n, counted = others(KEYS[3], id, ARGV[5])
if counted or n < tonumber(ARGV[3]) then
  redis.call('SADD', KEYS[3], id)
  redis.call('ZREM', KEYS[4], id)
  redis.call('ZREM', KEYS[5], id)
  redis.call('HDEL', KEYS[1], '${KEY_PARK_FIELDS.join("', '")}')
  return {'admit', tostring(n), counted and '1' or '0'}
end
local since = redis.call('HGET', KEYS[1], 'keyWaitingSince') or ARGV[4]
redis.call('ZADD', KEYS[4], 'NX', since, id)
redis.call('ZADD', KEYS[5], 'NX', since, id)
redis.call('HSET', KEYS[1], 'stateDetail', ARGV[6], 'keyWaiting', KEYS[4], 'keyParked', KEYS[5], 'keyWaitingSince', since)
return {'park', tostring(n), '0'}
`;

/**
 * The end of an admitted card's run (whatever it came to): its place goes, and the key's longest
 * waiting card is answered, to be made ready. A run whose job another run holds now (it was fenced
 * and the card taken over) leaves the count to that run. KEYS: 1 BullMQ lock of the card's job,
 * 2 the key's running set, 3 its waiting set. ARGV: 1 run token, 2 card id. Answers the id or ''.
 */
const RELEASE_LUA = `
local lock = redis.call('GET', KEYS[1])
if lock and lock ~= ARGV[1] then return '' end
redis.call('SREM', KEYS[2], ARGV[2])
local first = redis.call('ZPOPMIN', KEYS[3])
return first[1] or ''
`;

/**
 * After a parked card's job went to delayed: a card of its key that ended in between found it not
 * yet delayed and could not wake it, so it asks once more. 'wake' if there is room now (the caller
 * promotes its own job), else it is put back in its key's line at its first waiting time ('stay');
 * 'gone' if it is parked no more (admitted, cancelled or moved on meanwhile).
 * KEYS: 1 card hash, 2 the key's running set, 3 its waiting set. ARGV: 1 card id, 2 maxRunningPerKey, 3 job key prefix.
 */
const RECHECK_LUA = `${COUNT_LUA}
local since = redis.call('HGET', KEYS[1], 'keyWaitingSince')
if not since or not redis.call('HGET', KEYS[1], 'keyWaiting') then return 'gone' end
local n = others(KEYS[2], ARGV[1], ARGV[3])
if n < tonumber(ARGV[2]) then return 'wake' end
redis.call('ZADD', KEYS[3], 'NX', since, ARGV[1])
return 'stay'
`;

/**
 * How many of a lane's ready cards (waiting, then prioritized, in the order workers take them)
 * could not run now: a card of a concurrency key at the lane's limit, or of a supersede key whose
 * one place is taken, counting the places the cards ahead of it in the scan would take. What the
 * scale endpoint leaves out of its demand, so cards that would only be parked ask for no slot. A
 * card whose record carries no key (a board's own BullMQ job not yet taken) counts as one that runs.
 * The scan stops after ARGV 6 runnable cards (the most slots the lane can use: more demand changes
 * nothing) or ARGV 1 cards (SCALE_SCAN_MAX_CARDS); cards past it count as ones that run.
 * KEYS: 1 the lane's wait list, 2 its prioritized set. ARGV: 1 scan cap, 2 maxRunningPerKey ('' for
 * none), 3 card hash prefix, 4 the lane's store prefix, 5 the lane's job key prefix, 6 enough.
 * Answers {held back, scanned}.
 */
const HELD_BACK_LUA = `
local cap, enough = tonumber(ARGV[1]), tonumber(ARGV[6])
local limit = ARGV[2] ~= '' and tonumber(ARGV[2]) or nil
local right = redis.call('LRANGE', KEYS[1], -cap, -1)
local order = {}
for i = #right, 1, -1 do order[#order + 1] = right[i] end
if #order < cap then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, cap - #order - 1)) do order[#order + 1] = id end
end
local room = {}
local function roomOf(set, max)
  if room[set] == nil then
    local n = 0
    for _, m in ipairs(redis.call('SMEMBERS', set)) do
      if redis.call('EXISTS', ARGV[5] .. m .. ':lock') == 1 then n = n + 1 end
    end
    room[set] = max - n
  end
  return room[set]
end
local held, runnable, scanned = 0, 0, 0
for _, id in ipairs(order) do
  if runnable >= enough then break end
  scanned = scanned + 1
  local k = redis.call('HMGET', ARGV[3] .. id, 'concurrencyKey', 'supersedeKey')
  local gates = {}
  if k[1] and limit then gates[#gates + 1] = {ARGV[4] .. ':key:' .. k[1] .. ':running', limit} end
  if k[2] then gates[#gates + 1] = {ARGV[4] .. ':supersede:' .. k[2] .. ':running', 1} end
  local fits = true
  for _, g in ipairs(gates) do if roomOf(g[1], g[2]) <= 0 then fits = false end end
  if fits then
    for _, g in ipairs(gates) do room[g[1]] = room[g[1]] - 1 end
    runnable = runnable + 1
  else
    held = held + 1
  end
end
return {held, scanned}
`;

/** The most ready cards the scale endpoint's scan reads per lane; past it, cards count as ones that run. */
export const SCALE_SCAN_MAX_CARDS = 1_000;

const SCRIPTS = {
  lanesKeyAdmit: { numberOfKeys: 5, lua: ADMIT_LUA },
  lanesKeyRelease: { numberOfKeys: 3, lua: RELEASE_LUA },
  lanesKeyRecheck: { numberOfKeys: 3, lua: RECHECK_LUA },
  lanesKeyWaitFront: { numberOfKeys: 1, lua: WAIT_FRONT_LUA },
  lanesKeyHeldBack: { numberOfKeys: 2, lua: HELD_BACK_LUA },
};

/**
 * Which limit a key is under: a `concurrencyKey` (the lane's `maxRunningPerKey`) or a
 * `supersedeKey` (one at a time). Each has sets of its own, so a key may be both.
 */
export type KeyGateKind = 'concurrency' | 'supersede';

/** One card of a key on a lane. */
export interface KeyedCard {
  lane: string;
  cardId: string;
  key: string;
  /** Unset: a concurrency key. */
  gate?: KeyGateKind;
}

/** The Redis keys of a key's gate, and the detail its parked cards show. */
function gateKeys(card: KeyedCard): { running: string; waiting: string; parked: string; detail: string } {
  const { lane, key } = card;
  return card.gate === 'supersede'
    ? { running: keys.supersedeRunning(lane, key), waiting: keys.supersedeWaiting(lane, key), parked: keys.supersedeParked(lane), detail: SUPERSEDE_WAITING }
    : { running: keys.keyRunning(lane, key), waiting: keys.keyWaiting(lane, key), parked: keys.keyParked(lane), detail: KEY_LIMIT_WAITING };
}

export interface KeyAdmission {
  decision: 'admit' | 'park' | 'stale' | 'no-record';
  /** Other cards of the key counted running at the admission. */
  runningOthers: number;
  /** The card was counted already (its own earlier run). */
  counted: boolean;
}

const jobKeyPrefix = (lane: string) => `${QUEUE_PREFIX}:${queueName(lane)}:`;

/** The Redis side of fair per-key concurrency: each call is one script, atomic. */
export class KeyLimits {
  constructor(private readonly redis: Redis) {
    defineScriptsOnce(redis, SCRIPTS);
  }

  async admit(card: KeyedCard, token: string, maxRunningPerKey: number, nowMs: number): Promise<KeyAdmission> {
    const { lane, cardId } = card;
    const gate = gateKeys(card);
    const reply = (await this.redis.lanesKeyAdmit(
      keys.card(cardId),
      keys.jobLock(lane, cardId),
      gate.running,
      gate.waiting,
      gate.parked,
      token,
      cardId,
      maxRunningPerKey,
      nowMs,
      jobKeyPrefix(lane),
      gate.detail,
    )) as [KeyAdmission['decision'], string, string];
    return { decision: reply[0], runningOthers: Number(reply[1]), counted: reply[2] === '1' };
  }

  /** The card's run ended: answers the key's longest-waiting parked card, to be made ready, if any. */
  async release(card: KeyedCard, token: string): Promise<string | undefined> {
    const { lane, cardId } = card;
    const gate = gateKeys(card);
    const next = (await this.redis.lanesKeyRelease(keys.jobLock(lane, cardId), gate.running, gate.waiting, token, cardId)) as string;
    return next === '' ? undefined : next;
  }

  async recheck(card: KeyedCard, maxRunningPerKey: number): Promise<'wake' | 'stay' | 'gone'> {
    const { lane, cardId } = card;
    const gate = gateKeys(card);
    return (await this.redis.lanesKeyRecheck(keys.card(cardId), gate.running, gate.waiting, cardId, maxRunningPerKey, jobKeyPrefix(lane))) as 'wake' | 'stay' | 'gone';
  }

  /**
   * A woken card, just promoted by BullMQ's public promote (which puts it behind every waiting
   * job), is moved to the end of the wait list that workers take from, so it takes the place its
   * key just freed before the cards queued behind it. BullMQ's wait list is its internal layout:
   * only under the version it was checked against (JOB_LAYOUT_WRITABLE); elsewhere it waits its turn.
   */
  async toFront(lane: string, cardId: string): Promise<void> {
    if (JOB_LAYOUT_WRITABLE) await this.redis.lanesKeyWaitFront(keys.waitList(lane), cardId);
  }

  /** How many of the lane's cards are parked over their key's limit, and waiting for their supersede key's earlier card. */
  async parkedCounts(lane: string): Promise<{ concurrency: number; supersede: number }> {
    const [concurrency, supersede] = await Promise.all([this.redis.zcard(keys.keyParked(lane)), this.redis.zcard(keys.supersedeParked(lane))]);
    return { concurrency, supersede };
  }

  /** Which of these card ids are parked at either gate. */
  async parkedAmong(lane: string, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set();
    const [byKey, bySupersede] = await Promise.all([this.redis.zmscore(keys.keyParked(lane), ...ids), this.redis.zmscore(keys.supersedeParked(lane), ...ids)]);
    return new Set(ids.filter((_, i) => byKey[i] !== null || bySupersede[i] !== null));
  }

  /**
   * How many of the lane's waiting and prioritized cards could not run now for their keys (HELD_BACK_LUA),
   * reading at most `scanMax` of them and stopping once `enough` could run.
   */
  async heldBack(lane: string, maxRunningPerKey: number | undefined, enough: number, scanMax = SCALE_SCAN_MAX_CARDS): Promise<number> {
    const reply = (await this.redis.lanesKeyHeldBack(
      keys.waitList(lane),
      keys.prioritizedSet(lane),
      scanMax,
      maxRunningPerKey ?? '',
      keys.card(''),
      `${STORE_PREFIX}:lane:${lane}`,
      jobKeyPrefix(lane),
      enough,
    )) as [number, number];
    return reply[0];
  }

  /** The newest card of a supersede key on a lane, or undefined once forgotten (SUPERSEDE_LATEST_TTL_MS). */
  async supersedeLatest(lane: string, key: string): Promise<string | undefined> {
    return (await this.redis.get(keys.supersedeLatest(lane, key))) ?? undefined;
  }
}
