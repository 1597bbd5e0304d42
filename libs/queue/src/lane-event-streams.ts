/**
 * Every event goes to the one stream every lane shares (`keys.events()`, what the live reader and
 * an unscoped replay read) and, under the same id, to its lane's own stream (`keys.laneEvents`),
 * each kept to about EVENT_STREAM_MAX_LEN. The shared stream's window moves with every board's
 * events, so one board's burst trims what another needs to resume; a lane's stream moves with its
 * own only, and holds at least as much of its lane as the shared one does. A replay scoped to
 * some lanes falls back to their streams where the shared one was trimmed past its resume point
 * (apps/api event-fanout.ts).
 *
 * `keys.laneEventsSince()` is the id of the first event written this way (SET NX), so a lane stream
 * vouches for a resume point only from it on: before it, events went to the shared stream alone.
 * A lane stream that cannot take an id (its newest is later: the shared stream was deleted and
 * the clock had gone back) is started again at that id, and the mark moves to it.
 *
 * APPEND_EVENT_LUA defines `appendEvent(stream, laneStream, since, maxLen, json)` for a script
 * that writes events; it answers the event's id.
 */
export const APPEND_EVENT_LUA = `
local function appendEvent(stream, laneStream, since, maxLen, json)
  local id = redis.call('XADD', stream, 'MAXLEN', '~', maxLen, '*', 'e', json)
  local added = redis.pcall('XADD', laneStream, 'MAXLEN', '~', maxLen, id, 'e', json)
  if type(added) == 'table' and added.err then
    redis.call('DEL', laneStream)
    redis.call('XADD', laneStream, id, 'e', json)
    redis.call('SET', since, id)
  else
    redis.call('SET', since, id, 'NX')
  end
  return id
end
`;
