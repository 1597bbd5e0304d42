// The status page's cards, as pure functions: which listings a lane reads, how a card, a history entry
// and a result read, and how much of it the page keeps. No DOM and no fetch here (like status-model.js),
// so the tests run it as it is (apps/api/test/cards-model.test.ts).

/** Running cards listed per lane. A lane runs at most maxSlots cards at once, so this is rarely reached. */
export const CARDS_RUNNING_LISTED = 20;
/** The most recently updated cards listed per lane, besides the running ones. */
export const CARDS_RECENT_LISTED = 10;
/** Output lines the opened card keeps on the page, the newest; older ones go as new ones come. */
export const OUTPUT_LINES_KEPT = 200;
/** Characters of one output line kept: an agent chooses its lines' length (the job log cuts at 4,096). */
export const OUTPUT_LINE_CHARS = 1_000;
/** History entries shown, the newest (the API caps a history too; this bounds the page whatever it sends). */
export const HISTORY_ENTRIES_SHOWN = 100;
/** Characters of a card's result shown, as indented JSON. */
export const RESULT_CHARS_SHOWN = 4_000;
/**
 * Card listings and the opened card are read again at most this often, however fast card events come:
 * a burst of a hundred transitions is one re-read per lane, not a hundred.
 */
export const CARDS_REFRESH_MIN_INTERVAL_MS = 1_000;

const TERMINAL_STATES = new Set(['done', 'failed', 'cancelled']);

/** A card in this state has ended its run: nothing more comes on its output stream (until a retry). */
export function isTerminalState(state) {
  return TERMINAL_STATES.has(state);
}

/** The two pages a lane's card list is read from (`GET /v1/cards`, O(page)): its running cards, then its latest. */
export function cardListPaths(lane) {
  const l = encodeURIComponent(lane);
  return { running: `/v1/cards?lane=${l}&state=running&limit=${CARDS_RUNNING_LISTED}`, recent: `/v1/cards?lane=${l}&limit=${CARDS_RECENT_LISTED}` };
}

/** Running cards first, then the latest of the others, each card once, within the two caps. */
export function mergeCardLists(running, recent) {
  const first = (running ?? []).slice(0, CARDS_RUNNING_LISTED);
  const ids = new Set(first.map((c) => c.id));
  return [...first, ...(recent ?? []).filter((c) => !ids.has(c.id)).slice(0, CARDS_RECENT_LISTED)];
}

/** A card event (`card.*` naming a card): its lane's list, and the card if it is open, are read again. */
export function isCardEvent(e) {
  return typeof e.type === 'string' && e.type.startsWith('card.') && typeof e.cardId === 'string';
}

/** How long ago `sinceIso` was, in the largest whole unit: `12s`, `5m`, `3h`, `2d`. */
export function ageText(sinceIso, nowMs) {
  const ms = nowMs - Date.parse(sinceIso);
  if (!Number.isFinite(ms)) return '';
  const s = Math.max(0, Math.floor(ms / 1000));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h`;
  return `${Math.floor(s / 86_400)}d`;
}

/** A card's state with what qualifies it: `blocked (needs-human)`, `failed (timeout)`, `queued (waiting (key limit))`. */
export function cardStateText(card) {
  const detail = card.blockedReason ?? card.failedReason ?? card.stateDetail;
  return detail ? `${card.state} (${detail})` : card.state;
}

/** One history entry as a line of text, time apart: what it moved to, on which attempt and sandbox, and why. */
export function historyEntryText(h) {
  const parts = [cardStateText(h), `attempt ${h.attempt}`];
  if (h.sandboxId) parts.push(`sandbox ${h.sandboxId}`);
  if (h.verdict) parts.push(`verdict ${h.verdict}`);
  if (h.observedExitCode !== undefined) parts.push(`observed exit ${h.observedExitCode}`);
  if (h.exitCode !== undefined) parts.push(`exit ${h.exitCode}`);
  if (h.retryAt) parts.push(`retry at ${h.retryAt}`);
  return h.message ? `${parts.join(' · ')}: ${h.message}` : parts.join(' · ');
}

/** The newest history entries within the cap, oldest first, and how many earlier ones are not shown (folded by the API or cut here). */
export function historyShown(card) {
  const history = card.history ?? [];
  const shown = history.slice(-HISTORY_ENTRIES_SHOWN);
  return { entries: shown, hidden: (card.historyDropped ?? 0) + history.length - shown.length };
}

/** A result as indented JSON, cut at the cap; undefined when the card has none. */
export function resultText(result) {
  if (result === undefined) return undefined;
  const text = JSON.stringify(result, null, 2) ?? String(result);
  return text.length > RESULT_CHARS_SHOWN ? `${text.slice(0, RESULT_CHARS_SHOWN)}…` : text;
}

/** `kept` with `more` lines after it: the newest OUTPUT_LINES_KEPT, each cut at OUTPUT_LINE_CHARS. */
export function keepLastLines(kept, more) {
  const cut = more.map((line) => (line.length > OUTPUT_LINE_CHARS ? `${line.slice(0, OUTPUT_LINE_CHARS)}…` : line));
  return [...kept, ...cut].slice(-OUTPUT_LINES_KEPT);
}

/** A card's `outputTail` (lines joined by newlines) as the lines the page keeps. */
export function tailLines(outputTail) {
  if (!outputTail) return [];
  const lines = outputTail.split('\n');
  if (lines[lines.length - 1] === '') lines.pop();
  return keepLastLines([], lines);
}

/** The lines of an `event: output` frame's data, or none when it is not one (the page never throws on a frame). */
export function outputLinesOf(frame) {
  if (frame.event !== 'output' || frame.data === undefined) return [];
  try {
    const lines = JSON.parse(frame.data).lines;
    return Array.isArray(lines) ? lines.filter((l) => typeof l === 'string') : [];
  } catch {
    return [];
  }
}
