// The status page's decisions, as pure functions: what a slot's sandbox reads as, which events are
// verdicts, and how one event changes what the page shows. No DOM and no fetch here, so the same
// file runs in the browser and in the tests (apps/api/test/status-model.test.ts).

/** On load the page replays this much of the event stream, so the latest verdicts show at once. */
export const RECENT_EVENTS_WINDOW_MS = 15 * 60_000;
/** Verdicts kept on the page, newest first. */
export const MAX_VERDICTS = 30;

const CARD_COUNT_STATES = ['waiting', 'prioritized', 'delayed', 'active', 'completed', 'failed', 'blocked'];

/** The resume point that replays the last `windowMs` of the stream (stream ids are `<ms>-<seq>`). */
export function recentStreamId(nowMs, windowMs = RECENT_EVENTS_WINDOW_MS) {
  return `${Math.max(0, Math.floor(nowMs - windowMs))}-0`;
}

/** One server-sent frame (the text between blank lines): its id, event name and data; comments are skipped. */
export function parseFrame(frame) {
  const out = {};
  const data = [];
  for (const line of frame.split('\n')) {
    if (line === '' || line.startsWith(':')) continue;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
    if (field === 'id') out.id = value;
    else if (field === 'event') out.event = value;
    else if (field === 'data') data.push(value);
  }
  if (data.length) out.data = data.join('\n');
  return out;
}

/** A frame's data as a lane event, or undefined for anything that is not one (unknown types pass). */
export function eventOf(frame) {
  if (frame.data === undefined) return undefined;
  try {
    const e = JSON.parse(frame.data);
    return e && typeof e === 'object' && typeof e.type === 'string' && typeof e.lane === 'string' ? e : undefined;
  } catch {
    return undefined;
  }
}

const slotKey = (lane, slot) => `${lane}/${slot}`;

/**
 * The verdict an event records, or undefined: `sandbox.dead` is the supervisor calling a sandbox dead
 * (with the exit code it observed and why); a card event carries the verdict its run was given.
 */
export function verdictOf(e) {
  const data = e.data ?? {};
  const base = { at: e.at, lane: e.lane, slot: e.slot, cardId: e.cardId, sandboxId: e.sandboxId, type: e.type };
  if (e.type === 'sandbox.dead') return { ...base, verdict: 'sandbox-dead', observedExitCode: data.observedExitCode ?? 'unknown', reason: data.reason };
  if (typeof data.verdict === 'string') return { ...base, verdict: data.verdict, observedExitCode: data.observedExitCode, reason: data.message };
  if (e.type === 'card.done') return { ...base, verdict: 'ok' };
  return undefined;
}

/**
 * What a slot's sandbox reads as on the page: live, dead, respawning (a replacement is being made for
 * a dead one), starting, terminated or none. A dead or replaced sandbox carries its observed exit code
 * and the reason, from the slot itself or from the death the page last saw for that slot.
 */
export function sandboxView(slot, death) {
  const sb = slot.sandbox;
  if (!sb) return { state: 'none' };
  const seen = death && death.sandboxId === sb.id ? death : undefined;
  const exit = sb.observedExitCode ?? seen?.observedExitCode;
  switch (sb.state) {
    case 'live':
      return { state: 'live', id: sb.id, pid: sb.pid };
    case 'dead':
      return { state: 'dead', id: sb.id, pid: sb.pid, observedExitCode: exit ?? 'unknown', reason: seen?.reason };
    case 'creating':
      // While it respawns the slot still names the dead sandbox, with the exit code observed.
      return exit !== undefined || seen ? { state: 'respawning', id: sb.id, observedExitCode: exit ?? 'unknown', reason: seen?.reason } : { state: 'starting' };
    case 'terminated':
      return { state: 'terminated', id: sb.id };
    default:
      return { state: String(sb.state), id: sb.id };
  }
}

/** Card counts in a fixed order, then blocked cards by reason (`blocked:<reason>` keys). */
export function countsOf(lane) {
  const counts = lane.counts ?? {};
  const states = CARD_COUNT_STATES.map((s) => [s, counts[s] ?? 0]);
  const blocked = Object.entries(counts)
    .filter(([k, n]) => k.startsWith('blocked:') && n > 0)
    .map(([k, n]) => [k.slice('blocked:'.length), n])
    .sort(([a], [b]) => (a < b ? -1 : 1));
  return { states, blocked };
}

/** The page's starting model. */
export function emptyModel() {
  return { lanes: [], deaths: {}, verdicts: [], blocked: {} };
}

/** A lane's blocked cards (from /v1/lanes/:name/blocked) grouped by reason, reasons in name order. */
export function blockedByReason(cards) {
  const groups = new Map();
  for (const c of cards ?? []) groups.set(c.blockedReason, [...(groups.get(c.blockedReason) ?? []), c]);
  return [...groups.entries()].sort(([a], [b]) => (a < b ? -1 : 1));
}

/** Lanes whose blocked cards should be listed: those with any (others are cleared). */
export function lanesWithBlocked(model) {
  return model.lanes.filter((l) => (l.counts?.blocked ?? 0) > 0).map((l) => l.name);
}

/** A lane's blocked list replaced (undefined clears it). */
export function withBlocked(model, lane, list) {
  const blocked = { ...model.blocked };
  if (list) blocked[lane] = list;
  else delete blocked[lane];
  return { ...model, blocked };
}

/**
 * One event applied to the model: a death is shown at once on its slot (the respawn may beat the next
 * read of /v1/lanes), a verdict joins the list, and `refresh` says whether /v1/lanes should be read
 * again. Any event may change counts or slots, so every one asks for a refresh, unknown types included.
 */
export function applyEvent(model, e) {
  let { lanes, deaths, verdicts } = model;
  const { blocked } = model;
  if (e.type === 'sandbox.dead' && e.slot) {
    const death = { sandboxId: e.sandboxId, observedExitCode: e.data?.observedExitCode ?? 'unknown', reason: e.data?.reason, at: e.at };
    deaths = { ...deaths, [slotKey(e.lane, e.slot)]: death };
    lanes = lanes.map((l) =>
      l.name !== e.lane
        ? l
        : {
            ...l,
            slots: l.slots.map((s) =>
              // Only the sandbox the event names: a replayed old death must not mark its replacement dead.
              s.slot === e.slot && s.sandbox && s.sandbox.id === e.sandboxId ? { ...s, sandbox: { ...s.sandbox, state: 'dead', observedExitCode: death.observedExitCode } } : s,
            ),
          },
    );
  }
  const verdict = verdictOf(e);
  if (verdict) verdicts = [verdict, ...verdicts].slice(0, MAX_VERDICTS);
  return { model: { lanes, deaths, verdicts, blocked }, refresh: true };
}

/** Lanes freshly read from /v1/lanes replace the model's; deaths and verdicts stay. */
export function withLanes(model, lanes) {
  return { ...model, lanes };
}

/** The last death the page knows for a slot, if any. */
export function deathOf(model, lane, slot) {
  return model.deaths[slotKey(lane, slot)];
}

/** Records a dead sandbox's record (from /v1/sandboxes/:id) as its slot's death, unless a later one is known. */
export function withDeathRecord(model, record) {
  const key = slotKey(record.lane, record.slot);
  const known = model.deaths[key];
  if (known && (known.sandboxId === record.id || (known.at ?? '') > (record.deadAt ?? ''))) return model;
  const death = { sandboxId: record.id, observedExitCode: record.observedExitCode ?? 'unknown', reason: record.reason, at: record.deadAt };
  return { ...model, deaths: { ...model.deaths, [key]: death } };
}

/** Slots whose sandbox is dead or being replaced but whose death the page has not seen: their records tell why. */
export function sandboxesToLookUp(model) {
  const ids = [];
  for (const lane of model.lanes) {
    for (const s of lane.slots) {
      const view = sandboxView(s, deathOf(model, lane.name, s.slot));
      if ((view.state === 'dead' || view.state === 'respawning') && view.reason === undefined && view.id) ids.push(view.id);
    }
  }
  return ids;
}

/** An exit code as shown: numbers as they are (0 stays 0), anything else as `unknown`. */
export function exitCodeText(code) {
  return typeof code === 'number' ? String(code) : 'unknown';
}
