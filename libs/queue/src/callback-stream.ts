import type { Redis, Result } from 'ioredis';
import { keys } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

/**
 * The callback stream is never trimmed by length: an entry leaves it only once every consumer
 * group on it has acknowledged it. `ackCallbacks` acknowledges, then trims with `XTRIM MINID` up
 * to the oldest entry some group still owes: its oldest pending (read, unacknowledged) entry, or
 * the first it has not read. A stream with no group yet is not trimmed at all.
 *
 * An entry that names its lane (field `l`) is given back to its lane's count of owed callbacks
 * (keys.callbacksOwed) when its acknowledgement is the one that takes it off the group's pending
 * list, so an entry acknowledged twice is given back once. A stream that is empty after the trim
 * owes nothing: the counts go with it, so a count that drifted (an entry trimmed by hand) heals.
 *
 * KEYS: 1 callback stream, 2 its owed counts. ARGV: 1 group, 2.. entry ids to acknowledge.
 * Answers the stream's length after the trim.
 */
const ACK_TRIM_LUA = `
local stream = KEYS[1]
for i = 2, #ARGV do
  if redis.call('XACK', stream, ARGV[1], ARGV[i]) == 1 then
    local entry = redis.call('XRANGE', stream, ARGV[i], ARGV[i])[1]
    if entry then
      for f = 1, #entry[2], 2 do
        if entry[2][f] == 'l' and redis.call('HINCRBY', KEYS[2], entry[2][f + 1], -1) <= 0 then redis.call('HDEL', KEYS[2], entry[2][f + 1]) end
      end
    end
  end
end
local function parse(id)
  local dash = string.find(id, '-', 1, true)
  return tonumber(string.sub(id, 1, dash - 1)), tonumber(string.sub(id, dash + 1))
end
local floorMs, floorSeq
local function lower(ms, seq)
  if not floorMs or ms < floorMs or (ms == floorMs and seq < floorSeq) then floorMs, floorSeq = ms, seq end
end
if redis.call('EXISTS', stream) == 0 then
  redis.call('DEL', KEYS[2])
  return 0
end
local groups = redis.call('XINFO', 'GROUPS', stream)
if #groups == 0 then return redis.call('XLEN', stream) end
for _, g in ipairs(groups) do
  local info = {}
  for i = 1, #g, 2 do info[g[i]] = g[i + 1] end
  local pending = redis.call('XPENDING', stream, info['name'])
  if pending[1] > 0 then
    lower(parse(pending[2]))
  else
    local ms, seq = parse(info['last-delivered-id'])
    lower(ms, seq + 1)
  end
end
redis.call('XTRIM', stream, 'MINID', string.format('%d-%d', floorMs, floorSeq))
local length = redis.call('XLEN', stream)
if length == 0 then redis.call('DEL', KEYS[2]) end
return length
`;

/** Ids acknowledged per script call: Lua's unpack has a stack limit well above this. */
const ACK_CHUNK = 1_000;

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesCallbackAck(...args: Array<string | number>): Result<unknown, Context>;
  }
}
const SCRIPTS = { lanesCallbackAck: { numberOfKeys: 2, lua: ACK_TRIM_LUA } };

/** Acknowledges delivered (or given-up) callback entries and trims what no group still owes; answers the stream's length. */
export async function ackCallbacks(redis: Redis, group: string, ids: readonly string[]): Promise<number> {
  defineScriptsOnce(redis, SCRIPTS);
  let length = 0;
  for (let i = 0; i === 0 || i < ids.length; i += ACK_CHUNK) {
    length = Number(await redis.lanesCallbackAck(keys.callbacks(), keys.callbacksOwed(), group, ...ids.slice(i, i + ACK_CHUNK)));
  }
  return length;
}

/** Each lane's callback entries not yet acknowledged (keys.callbacksOwed); a lane that owes none is absent. */
export async function callbacksOwed(redis: Redis): Promise<Record<string, number>> {
  const raw = await redis.hgetall(keys.callbacksOwed());
  return Object.fromEntries(Object.entries(raw).map(([lane, count]) => [lane, Number(count)]));
}

/** Entries on the callback stream not yet acknowledged by every group (and any not trimmed behind them): one XLEN. */
export function callbackBacklog(redis: Redis): Promise<number> {
  return redis.xlen(keys.callbacks());
}
