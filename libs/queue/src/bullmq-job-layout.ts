import { createRequire } from 'node:module';
import type { Card, LaneConfig } from '@lanes/contracts';
import { jobOptions } from './job-options.js';

/**
 * An enqueue writes a plain card's BullMQ job itself, inside its own script, instead of handing
 * it to BullMQ's add (one script call per job, a `Job` object and packed arguments each): that add
 * was most of a bulk enqueue's cost (bench/README.md, "enqueue"). The job it writes is the one
 * BullMQ 6.7.0's `addStandardJob` writes for a job with a custom id, no parent, no delay, no
 * priority and no deduplication: the same hash, wait-list entry, marker and events.
 *
 * That layout is BullMQ's internal business, so it is written only under the BullMQ version it was
 * checked against (libs/queue/test/standard-job.test.ts compares it, key by key, with what
 * `Queue.add` writes). Under any other version every card goes through BullMQ's own add, as
 * prioritized cards always do.
 */
export const STANDARD_JOB_BULLMQ_VERSION = '6.7.0';

/** The BullMQ this process runs (its package.json; BullMQ declares no exports map). */
export const installedBullmqVersion: string = (createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version;

const writable = installedBullmqVersion === STANDARD_JOB_BULLMQ_VERSION;

/**
 * The options BullMQ would store for the card's job, as JSON; '' when BullMQ must add the job
 * itself: a prioritized card (BullMQ's prioritized set and its counter), or another BullMQ.
 * lanes' options have no key BullMQ renames when it stores them (`optsAsJSON`), so they are
 * stored as given.
 */
export function standardJobOpts(card: Card, lane: Pick<LaneConfig, 'attempts'>): string {
  if (!writable || card.priority) return '';
  return JSON.stringify(jobOptions(card, lane));
}

/**
 * Lua, for the enqueue script: `writeStandardJob(qp, lane, id, data, opts, timestampMs)` adds the
 * job as `addStandardJob` does, or, when the job key exists, answers as BullMQ does a duplicate:
 * a `duplicated` event and nothing else. What BullMQ reads per queue (the events' max length, paused
 * or at its concurrency limit) is read once per lane per script: nothing in the script changes it.
 */
export const WRITE_STANDARD_JOB_LUA = `
local laneQueueState = {}
local function queueState(jq)
  local s = laneQueueState[jq]
  if s then return s end
  local maxEvents = redis.call('HGET', jq .. 'meta', 'opts.maxLenEvents')
  if not maxEvents then
    maxEvents = 10000
    redis.call('HSET', jq .. 'meta', 'opts.maxLenEvents', maxEvents)
  end
  local attrs = redis.call('HMGET', jq .. 'meta', 'paused', 'concurrency')
  local held = attrs[1] and true or false
  if not held and attrs[2] then held = redis.call('LLEN', jq .. 'active') >= tonumber(attrs[2]) end
  s = {maxEvents = maxEvents, held = held}
  laneQueueState[jq] = s
  return s
end
local function writeStandardJob(qp, lane, id, data, opts, timestampMs)
  local jq = qp .. ':' .. lane .. ':'
  local jobKey = jq .. id
  local s = queueState(jq)
  redis.call('INCR', jq .. 'id')
  if redis.call('EXISTS', jobKey) == 1 then
    redis.call('XADD', jq .. 'events', 'MAXLEN', '~', s.maxEvents, '*', 'event', 'duplicated', 'jobId', id)
    return
  end
  redis.call('HMSET', jobKey, 'name', lane, 'data', data, 'opts', opts, 'timestamp', timestampMs, 'delay', 0, 'priority', 0)
  redis.call('XADD', jq .. 'events', '*', 'event', 'added', 'jobId', id, 'name', lane)
  redis.call('LPUSH', jq .. 'wait', id)
  if not s.held then redis.call('ZADD', jq .. 'marker', 0, '0') end
  redis.call('XADD', jq .. 'events', 'MAXLEN', '~', s.maxEvents, '*', 'event', 'waiting', 'jobId', id)
end
`;
