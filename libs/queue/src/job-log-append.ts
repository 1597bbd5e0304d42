import type { Redis, Result } from 'ioredis';
import { agentLimits } from '@lanes/contracts';
import { keys } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesJobLogAppend(...args: Array<string | number>): Result<number, Context>;
  }
}

/**
 * BullMQ's `addLog` for many lines at once: the lines land as separate log entries (as Bull Board
 * shows them), in one round trip instead of one per line. Like BullMQ's, it writes nothing for a
 * job that is gone (-1), and keeps only the last `keepLogs` entries when that is set. A job whose
 * card has ended carries the card's expiry (card-script.ts); a log list made after that gets the
 * same, so no log outlives its job.
 *
 * In the same step the batch becomes entries of the card's output stream (`GET /v1/cards/:id/output`
 * reads them; an entry's id is the SSE resume id): `l` lines joined by newlines, at most
 * CARD_OUTPUT_ENTRY_MAX_BYTES of them per entry, `t` the bytes of output written to the stream so far,
 * this entry included. The stream is held to the byte budget (CARD_OUTPUT_MAX_BYTES): a batch larger
 * than it keeps only its last lines that fit, and whole entries are trimmed oldest first while what
 * the stream holds would pass it. So nothing an agent prints makes the stream hold more than the
 * budget, nor less than the budget less one entry (were a large batch one entry, a few bytes more
 * would drop it whole, and a flood's last 64 KiB with it), and a reader resuming from an id it was given
 * gets every later entry that is still held, once.
 * KEYS: 1 job hash, 2 job log list, 3 the card's output stream. ARGV: 1 keepLogs ('' for all),
 * 2 the output stream's byte budget, 3 the most bytes of lines per entry, 4… lines.
 */
const APPEND_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('RPUSH', KEYS[2], unpack(ARGV, 4))
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
local budget = tonumber(ARGV[2])
local entryMax = tonumber(ARGV[3])
local first = #ARGV
local size = #ARGV[first]
while first > 4 and size + 1 + #ARGV[first - 1] <= budget do
  first = first - 1
  size = size + 1 + #ARGV[first]
end
local function total(entry)
  local t, len = 0, 0
  for i = 1, #entry[2], 2 do
    if entry[2][i] == 't' then t = tonumber(entry[2][i + 1]) elseif entry[2][i] == 'l' then len = #entry[2][i + 1] end
  end
  return t, len
end
local last = redis.call('XREVRANGE', KEYS[3], '+', '-', 'COUNT', 1)[1]
local written = 0
if last then written = total(last) end
local i = first
while i <= #ARGV do
  local j, len = i, #ARGV[i]
  while j < #ARGV and len + 1 + #ARGV[j + 1] <= entryMax do
    j = j + 1
    len = len + 1 + #ARGV[j]
  end
  written = written + len
  redis.call('XADD', KEYS[3], '*', 'l', table.concat(ARGV, '\\n', i, j), 't', written)
  i = j + 1
end
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
-- An entry is kept while it starts at or after the floor; the newest always does (its lines fit the budget).
-- While no more than the budget has ever been written, nothing can be over it.
local floor = written - budget
while floor > 0 do
  local head = redis.call('XRANGE', KEYS[3], '-', '+', 'COUNT', 32)
  local keep
  local drop = {}
  for _, entry in ipairs(head) do
    local t, len = total(entry)
    if t - len >= floor then keep = entry[1] break end
    drop[#drop + 1] = entry[1]
  end
  if keep then
    redis.call('XTRIM', KEYS[3], 'MINID', keep)
    break
  end
  if #drop == 0 then break end
  redis.call('XDEL', KEYS[3], unpack(drop))
end
if ARGV[1] ~= '' then
  local keep = tonumber(ARGV[1])
  redis.call('LTRIM', KEYS[2], -keep, -1)
  return math.min(keep, n)
end
return n
`;

const SCRIPTS = { lanesJobLogAppend: { numberOfKeys: 3, lua: APPEND_LUA } };

/**
 * Appends lines to the BullMQ log of a lane's job (job id = card id) and to the card's output stream;
 * answers the log's length, or -1 if the job is gone.
 */
export async function appendJobLog(
  redis: Redis,
  lane: string,
  jobId: string,
  lines: readonly string[],
  keepLogs?: number,
  outputMaxBytes: number = agentLimits.CARD_OUTPUT_MAX_BYTES,
): Promise<number> {
  if (lines.length === 0) return 0;
  defineScriptsOnce(redis, SCRIPTS);
  return redis.lanesJobLogAppend(
    keys.job(lane, jobId),
    keys.jobLogs(lane, jobId),
    keys.cardOutput(jobId),
    keepLogs ?? '',
    outputMaxBytes,
    agentLimits.CARD_OUTPUT_ENTRY_MAX_BYTES,
    ...lines,
  );
}
