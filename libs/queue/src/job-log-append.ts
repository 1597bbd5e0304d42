import type { Redis, Result } from 'ioredis';
import { keys } from './names.js';

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
 * KEYS: 1 job hash, 2 job log list. ARGV: 1 keepLogs ('' for all), 2… lines.
 */
const APPEND_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local n = redis.call('RPUSH', KEYS[2], unpack(ARGV, 2))
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
if ARGV[1] ~= '' then
  local keep = tonumber(ARGV[1])
  redis.call('LTRIM', KEYS[2], -keep, -1)
  return math.min(keep, n)
end
return n
`;

const defined = new WeakSet<Redis>();

/** Appends lines to the BullMQ log of a lane's job; answers the log's length, or -1 if the job is gone. */
export async function appendJobLog(redis: Redis, lane: string, jobId: string, lines: readonly string[], keepLogs?: number): Promise<number> {
  if (lines.length === 0) return 0;
  if (!defined.has(redis)) {
    defined.add(redis);
    redis.defineCommand('lanesJobLogAppend', { numberOfKeys: 2, lua: APPEND_LUA });
  }
  return redis.lanesJobLogAppend(keys.job(lane, jobId), keys.jobLogs(lane, jobId), keepLogs ?? '', ...lines);
}
