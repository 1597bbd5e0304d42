import type { Redis } from 'ioredis';
import { CALLBACK_EVENT_TYPES, keys } from '@lanes/queue';

/**
 * Before the callback stream existed the dispatcher's group (same name) read the main event
 * stream. What that group still held at an upgrade, read but unacknowledged (pending) or not read
 * yet, would never be delivered. The group's name there, and the stream, as that version left them.
 */
export const OLD_CALLBACK_STREAM = keys.events();

export interface CarriedCallbacks {
  /** Whether the old group was there (and is now gone). */
  found: boolean;
  /** Entries put on the callback stream that the group held pending (read, never acknowledged). */
  pending: number;
  /** Entries put on the callback stream that the group had not read yet. */
  unread: number;
}

/**
 * One atomic step, so two supervisors starting together carry everything exactly once: whoever
 * runs second finds no group. Run after the new group exists, or the carried entries would sit
 * behind its start ('$') unread.
 *
 * The old stream's entries pending in the group (in id order; ones trimmed away are lost either
 * way), then those after its last-delivered id, are put on the callback stream when the card
 * script would have put them there: an event a board hears of, of a card with a callbackUrl. An
 * event already on the callback stream (written since the upgrade, by a card script that writes
 * both streams) is not put there again: the same event JSON is the same event. Then the group is
 * destroyed.
 *
 * KEYS: 1 old (event) stream, 2 callback stream
 * ARGV: 1 group, 2 card key prefix, 3.. event types a board hears of
 */
const CARRY_LUA = `
local old, cbs = KEYS[1], KEYS[2]
local group, cardPrefix = ARGV[1], ARGV[2]
if redis.call('EXISTS', old) == 0 then return {0, 0, 0} end
local lastId
for _, g in ipairs(redis.call('XINFO', 'GROUPS', old)) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  if info['name'] == group then lastId = info['last-delivered-id'] end
end
if not lastId then return {0, 0, 0} end
local types = {}
for i = 3, #ARGV do types[ARGV[i]] = true end
local function eventOf(fields)
  for i = 1, #fields, 2 do if fields[i] == 'e' then return fields[i + 1] end end
end
local seen = {}
for _, entry in ipairs(redis.call('XRANGE', cbs, '-', '+')) do
  local e = eventOf(entry[2])
  if e then seen[e] = true end
end
local function wanted(e)
  if not e or seen[e] then return false end
  local ok, ev = pcall(cjson.decode, e)
  if not ok or type(ev) ~= 'table' or not types[ev.type] or type(ev.cardId) ~= 'string' then return false end
  local card = cardPrefix .. ev.cardId
  local cb = redis.call('HGET', card, 'callback')
  if not cb then
    local raw = redis.call('HGET', card, 'card')
    local okCard, c = pcall(cjson.decode, raw or 'null')
    cb = (okCard and type(c) == 'table' and type(c.callbackUrl) == 'string') and '1' or '0'
  end
  return cb == '1'
end
local pending, unread = 0, 0
local function carry(entry)
  local e = eventOf(entry[2])
  if not wanted(e) then return false end
  seen[e] = true
  redis.call('XADD', cbs, '*', 'e', e)
  return true
end
local from = '-'
while true do
  local page = redis.call('XPENDING', old, group, from, '+', 1000)
  for _, p in ipairs(page) do
    local entry = redis.call('XRANGE', old, p[1], p[1])[1]
    if entry and carry(entry) then pending = pending + 1 end
  end
  if #page < 1000 then break end
  from = '(' .. page[#page][1]
end
for _, entry in ipairs(redis.call('XRANGE', old, '(' .. lastId, '+')) do
  if carry(entry) then unread = unread + 1 end
end
redis.call('XGROUP', 'DESTROY', old, group)
return {1, pending, unread}
`;

/** Carries what the old group on the event stream still held over to the callback stream, then destroys it. */
export async function carryOldCallbacks(redis: Redis, group: string): Promise<CarriedCallbacks> {
  const reply = (await redis.eval(CARRY_LUA, 2, OLD_CALLBACK_STREAM, keys.callbacks(), group, keys.card(''), ...CALLBACK_EVENT_TYPES)) as [number, number, number];
  return { found: reply[0] === 1, pending: reply[1], unread: reply[2] };
}
