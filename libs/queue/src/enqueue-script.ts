import type { Redis, Result } from 'ioredis';
import { z } from 'zod';
import { CardStateSchema, type Card } from '@lanes/contracts';
import { keys } from './names.js';

/**
 * An enqueue is one MULTI: `lanesEnqueue` (this file), then BullMQ's own add of every card's job,
 * then `lanesEnqueueRelease`. One round trip, and atomic: no other client sees a record without
 * its job, or the guards below.
 *
 * BullMQ's add is a no-op when the job's key exists (a duplicate). `lanesEnqueue` uses that to
 * keep an add out where the card must not get a job: it puts a guard hash at that job key, and
 * `lanesEnqueueRelease` deletes the guards after the adds. A card gets a job only if
 *   - it is new (its record is written here), or
 *   - its record is queued and its job is gone (a crash between the two writes before enqueues
 *     were one MULTI): the add repairs it.
 * A card whose record is in any other state (running, blocked, done, failed, cancelled) is never
 * given a job, even when BullMQ has removed its finished job (removeOnComplete/removeOnFail).
 * When any id of the batch belongs to a card on another lane, nothing is written and every add of
 * the batch is guarded: the batch is refused whole.
 *
 * lanesEnqueue KEYS: 1 event stream, 2 guard set; then 4 per card: card hash, history, the lane's
 *   blocked set, the card's BullMQ job key.
 * ARGV: 1 event stream max length, 2 time (ISO), 3 history entry (JSON); then 5 per card: id, lane,
 *   card JSON, '1' if it has a callbackUrl, event (JSON).
 * Answers 'ok' or 'conflict', then per card its state before ('' when new) and lane.
 */
const ENQUEUE_LUA = `
local n = (#KEYS - 2) / 4
local states, lanes = {}, {}
local conflict = false
local seen = {}
for i = 1, n do
  local k, a = 2 + (i - 1) * 4, 3 + (i - 1) * 5
  -- The same id twice on two lanes is a conflict too.
  if seen[ARGV[a + 1]] and seen[ARGV[a + 1]] ~= ARGV[a + 2] then conflict = true end
  seen[ARGV[a + 1]] = ARGV[a + 2]
  local existing = redis.call('HMGET', KEYS[k + 1], 'state', 'lane')
  if existing[1] then
    states[i], lanes[i] = existing[1], existing[2] or ''
    if lanes[i] ~= ARGV[a + 2] then conflict = true end
  end
end
local reply = {conflict and 'conflict' or 'ok'}
local made = {}
for i = 1, n do
  local k, a = 2 + (i - 1) * 4, 3 + (i - 1) * 5
  local id = ARGV[a + 1]
  if not states[i] and made[id] then states[i], lanes[i] = 'queued', ARGV[a + 2] end
  if conflict or (states[i] and states[i] ~= 'queued') then
    if redis.call('EXISTS', KEYS[k + 4]) == 0 then
      redis.call('HSET', KEYS[k + 4], 'lanesEnqueueGuard', '1')
      redis.call('SADD', KEYS[2], KEYS[k + 4])
    end
  elseif not states[i] then
    made[id] = true
    redis.call('HSET', KEYS[k + 1], 'card', ARGV[a + 3], 'lane', ARGV[a + 2], 'state', 'queued', 'attempts', '0',
      'infraRetries', '0', 'createdAt', ARGV[2], 'updatedAt', ARGV[2], 'callback', ARGV[a + 4])
    redis.call('RPUSH', KEYS[k + 2], ARGV[3])
    redis.call('ZREM', KEYS[k + 3], id)
    redis.call('XADD', KEYS[1], 'MAXLEN', '~', ARGV[1], '*', 'e', ARGV[a + 5])
  end
  reply[#reply + 1] = states[i] or ''
  reply[#reply + 1] = lanes[i] or ''
end
return reply
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

const defined = new WeakSet<Redis>();

export function defineEnqueueScripts(redis: Redis): void {
  if (defined.has(redis)) return;
  defined.add(redis);
  redis.defineCommand(ENQUEUE_SCRIPT, { lua: ENQUEUE_LUA });
  redis.defineCommand(ENQUEUE_RELEASE_SCRIPT, { numberOfKeys: 1, lua: RELEASE_LUA });
}

/** The arguments of `lanesEnqueue` (numkeys first: the script takes a variable number of keys). */
export function enqueueArgs(cards: readonly Card[], at: string, eventStreamMaxLen: number): Array<string | number> {
  const k: string[] = [keys.events(), keys.enqueueGuards()];
  const a: Array<string | number> = [eventStreamMaxLen, at, JSON.stringify({ at, state: 'queued', attempt: 0, message: 'enqueued' })];
  for (const card of cards) {
    k.push(keys.card(card.id), keys.history(card.id), keys.blocked(card.lane), keys.job(card.lane, card.id));
    a.push(card.id, card.lane, JSON.stringify(card), card.callbackUrl ? '1' : '0', JSON.stringify({ type: 'card.queued', at, lane: card.lane, cardId: card.id }));
  }
  return [k.length, ...k, ...a];
}

/** What each card was before this enqueue: undefined when it is new. */
export type EnqueueReply = { conflict: boolean; before: Array<{ state: z.infer<typeof CardStateSchema>; lane: string } | undefined> };

const ReplySchema = z.array(z.string()).min(1);

export function parseEnqueueReply(raw: unknown, count: number): EnqueueReply {
  const flat = ReplySchema.parse(raw);
  if (flat.length !== 1 + 2 * count || (flat[0] !== 'ok' && flat[0] !== 'conflict'))
    throw new Error(`enqueue script answered ${JSON.stringify(flat.slice(0, 3))}… for ${count} cards`);
  const before: EnqueueReply['before'] = [];
  for (let i = 0; i < count; i++) {
    const state = flat[1 + 2 * i]!;
    before.push(state === '' ? undefined : { state: CardStateSchema.parse(state), lane: flat[2 + 2 * i]! });
  }
  return { conflict: flat[0] === 'conflict', before };
}
