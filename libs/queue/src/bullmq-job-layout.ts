import { createRequire } from 'node:module';
import type { Card, LaneConfig } from '@lanes/contracts';
import { jobOptions } from './job-options.js';

/**
 * An enqueue writes each card's BullMQ job itself, inside its own record script, instead of
 * handing it to BullMQ's add (one script call per job, a `Job` object and packed arguments each):
 * that add was most of a bulk enqueue's cost (bench/README.md, "enqueue"). The job it writes is
 * the one BullMQ 6.7.0 writes for a job with a custom id and no parent, delay or deduplication:
 * `addStandardJob`'s (wait list) or, for a prioritized card, `addPrioritizedJob`'s (prioritized
 * set): the same hash, list or set entry, counters, marker and events.
 *
 * That layout is BullMQ's internal business, so it is written only under the BullMQ version it was
 * checked against (libs/queue/test/bullmq-job-layout.test.ts compares it, key by key, with what
 * `Queue.add` writes). Under any other version every job goes through BullMQ's own add.
 */
export const JOB_LAYOUT_BULLMQ_VERSION = '6.7.0';

/** The BullMQ this process runs (its package.json; BullMQ declares no exports map). */
export const installedBullmqVersion: string = (createRequire(import.meta.url)('bullmq/package.json') as { version: string }).version;

/** Whether lanes writes jobs itself by default: only under the BullMQ whose layout it was checked against. */
export const JOB_LAYOUT_WRITABLE = installedBullmqVersion === JOB_LAYOUT_BULLMQ_VERSION;

/**
 * The options BullMQ stores for the card's job, as JSON. lanes' options have no key BullMQ renames
 * when it stores them (`optsAsJSON`), so they are stored as given.
 */
export function jobLayoutOpts(card: Card, lane: Pick<LaneConfig, 'attempts'> & Partial<Pick<LaneConfig, 'retention'>>): string {
  // Only jobId differs between the cards of one lane and priority: the rest is stringified once.
  let byPriority = optsTemplates.get(lane);
  if (!byPriority) optsTemplates.set(lane, (byPriority = new Map()));
  let template = byPriority.get(card.priority);
  if (!template) {
    const json = JSON.stringify(jobOptions({ ...card, id: ID_MARK }, lane));
    const at = json.indexOf(JSON.stringify(ID_MARK));
    template = [json.slice(0, at), json.slice(at + JSON.stringify(ID_MARK).length)];
    byPriority.set(card.priority, template);
  }
  return template[0] + JSON.stringify(card.id) + template[1];
}

/** Stands for the card's id in a lane's options template: no id can hold it (ids are [A-Za-z0-9._-]). */
const ID_MARK = '\u0000';
const optsTemplates = new WeakMap<object, Map<number, [string, string]>>();

/**
 * Lua, for the enqueue script: `writeJob(qp, lane, id, data, opts, priority, timestampMs)` adds the
 * job as BullMQ's add does, or, when the job key exists, answers as BullMQ does a duplicate: a
 * `duplicated` event and nothing else. What BullMQ reads per queue (the events' max length, paused
 * or at its concurrency limit) is read once per lane per script: nothing in the script changes it.
 * A prioritized job's score is BullMQ's: priority × 2³² plus the queue's priority counter, so jobs
 * of one priority keep the order they came in.
 *
 * BullMQ's add bumps the queue's id counter and sets its marker once per job; `finishJobs()` does
 * both once per lane after the script's last writeJob (an INCRBY of the jobs written, one ZADD), the
 * same end state, since nothing runs between the commands of a script. A script that calls
 * writeJob calls finishJobs before it returns.
 */
export const WRITE_JOB_LUA = `
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
  s = {maxEvents = maxEvents, held = held, written = 0}
  laneQueueState[jq] = s
  return s
end
local function finishJobs()
  for jq, s in pairs(laneQueueState) do
    if s.written > 0 then
      redis.call('INCRBY', jq .. 'id', s.written)
      if s.wrote and not s.held then redis.call('ZADD', jq .. 'marker', 0, '0') end
    end
  end
end
local function writeJob(qp, lane, id, data, opts, priority, timestampMs)
  local jq = qp .. ':' .. lane .. ':'
  local jobKey = jq .. id
  local s = queueState(jq)
  s.written = s.written + 1
  if redis.call('EXISTS', jobKey) == 1 then
    redis.call('XADD', jq .. 'events', 'MAXLEN', '~', s.maxEvents, '*', 'event', 'duplicated', 'jobId', id)
    return
  end
  redis.call('HMSET', jobKey, 'name', lane, 'data', data, 'opts', opts, 'timestamp', timestampMs, 'delay', 0, 'priority', priority)
  redis.call('XADD', jq .. 'events', '*', 'event', 'added', 'jobId', id, 'name', lane)
  if priority > 0 then
    local counter = redis.call('INCR', jq .. 'pc')
    redis.call('ZADD', jq .. 'prioritized', priority * 0x100000000 + counter % 0x100000000, id)
  else
    redis.call('LPUSH', jq .. 'wait', id)
  end
  s.wrote = true
  redis.call('XADD', jq .. 'events', 'MAXLEN', '~', s.maxEvents, '*', 'event', 'waiting', 'jobId', id)
end
`;

/**
 * Lua: a waiting job to the end of its lane's wait list that BullMQ's workers take from next
 * (moveToActive's RPOPLPUSH pops the right end; an add or a promote pushes on the left), if it is
 * still waiting. A re-driven card ran before the cards now queued were taken, and a sandbox's death
 * put it back: it goes first again instead of behind the backlog. LREM scans from the left, where
 * the promote just put it. KEYS: 1 the wait list. ARGV: 1 the job id. Answers 1 when it moved it.
 */
export const WAIT_FRONT_LUA = `
if redis.call('LREM', KEYS[1], 1, ARGV[1]) == 1 then
  redis.call('RPUSH', KEYS[1], ARGV[1])
  return 1
end
return 0
`;
