import type { Redis, Result } from 'ioredis';
import { keys } from './names.js';
import { defineScriptsOnce } from './redis-scripts.js';

declare module 'ioredis' {
  interface RedisCommander<Context> {
    lanesTakeCards(...args: Array<string | number>): Result<[number, number], Context>;
  }
}

/** A token's rate: cards a second, from a bucket that holds `burst`. */
export interface CardRate {
  readonly perSecond: number;
  readonly burst: number;
}

export type CardTake = { ok: true } | { ok: false; retryAfterMs: number };

/**
 * The token bucket of apps/api's `takeCards` (its table is the specification, and this script is
 * tested against it), held in Redis so every API process draws from one bucket per token. The
 * clock is Redis's own TIME unless ARGV[4] gives one, so processes with skewed clocks agree. A
 * bucket a full refill would restore needs no key: it expires then.
 * KEYS: 1 the bucket. ARGV: 1 cards wanted, 2 per second, 3 burst, 4 now in ms ('' for TIME).
 * Answers {1, 0} when taken, {0, ms until it could be} when refused (a refusal takes nothing).
 */
const TAKE_LUA = `
local want, rate, burst = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local now = tonumber(ARGV[4])
if not now then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local held = redis.call('HMGET', KEYS[1], 'cards', 'at')
local cards = burst
if held[1] then
  local elapsed = math.max(0, now - tonumber(held[2]))
  cards = math.min(burst, tonumber(held[1]) + elapsed * rate / 1000)
end
local taken = want <= cards
if taken then cards = cards - want end
redis.call('HSET', KEYS[1], 'cards', tostring(cards), 'at', tostring(now))
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate))
if taken then return {1, 0} end
return {0, math.ceil((math.min(want, burst) - cards) * 1000 / rate)}
`;

const SCRIPTS = { lanesTakeCards: { numberOfKeys: 1, lua: TAKE_LUA } };

/** Takes `want` cards from `token`'s bucket, shared by every API process; `nowMs` replaces Redis's clock (tests). */
export async function takeSharedCards(redis: Redis, token: string, want: number, rate: CardRate, nowMs?: number): Promise<CardTake> {
  defineScriptsOnce(redis, SCRIPTS);
  const [taken, retryAfterMs] = await redis.lanesTakeCards(keys.cardRate(token), want, rate.perSecond, rate.burst, nowMs === undefined ? '' : nowMs);
  return taken === 1 ? { ok: true } : { ok: false, retryAfterMs };
}
