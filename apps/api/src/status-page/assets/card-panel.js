// The opened card on the status page: its history, result and output from `GET /v1/cards/:id`, and
// while it has not ended its output lines live from `GET /v1/cards/:id/output` (resumed with `?after=`
// after a drop, so no line is missed or repeated). One card is open at a time, so the page holds at
// most one output stream besides /v1/events; closing or opening another ends it.
import {
  CARDS_REFRESH_MIN_INTERVAL_MS,
  cardStateText,
  historyEntryText,
  historyShown,
  isTerminalState,
  keepLastLines,
  outputLinesOf,
  resultText,
  tailLines,
} from './cards-model.js';
import { coalesced, el, fmtTime, getJson, openStream, readFrames, sleep } from './page-kit.js';

/** A dropped output stream is reopened after this, from the last line seen. */
const OUTPUT_RECONNECT_DELAY_MS = 1_000;
/** Within this many pixels of its bottom, the output box follows new lines; scrolled further up, it stays put for reading. */
const FOLLOW_SLACK_PX = 24;

/** `{id, controller, lines, lastId, streaming}` of the open card, or undefined. */
let opened;
const byId = (id) => document.getElementById(id);
const cardPath = (id) => `/v1/cards/${encodeURIComponent(id)}`;

function setOutputState(o, state) {
  if (o !== opened) return;
  const badge = byId('card-output-state');
  badge.dataset.state = state;
  badge.textContent = state;
}

function showLines(o, lines) {
  if (o !== opened) return;
  o.lines = lines;
  const box = byId('card-output');
  const following = box.scrollHeight - box.scrollTop - box.clientHeight <= FOLLOW_SLACK_PX;
  box.replaceChildren(...lines.map((line) => el('div', { class: 'line' }, line)));
  if (following) box.scrollTop = box.scrollHeight;
}

function renderDetail(card) {
  byId('card').dataset.card = card.id;
  byId('card').dataset.state = card.state;
  byId('card-title').replaceChildren(el('span', { class: 'mono' }, card.id), ` ${card.title}`);
  const summary = [cardStateText(card), `attempts ${card.attempts}`, `infra retries ${card.infraRetries}`, `lane ${card.lane}`];
  if (card.sandboxId) summary.push(`sandbox ${card.sandboxId}`);
  if (card.blockedMessage) summary.push(`blocked: ${card.blockedMessage}`);
  byId('card-summary').textContent = summary.join(' · ');
  const { entries, hidden } = historyShown(card);
  byId('card-history').replaceChildren(
    ...(hidden ? [el('li', { class: 'hidden-entries' }, `${hidden} earlier entries not shown`)] : []),
    ...entries.map((h) => el('li', { class: 'history-entry', 'data-state': h.state }, el('time', { title: h.at }, fmtTime(h.at)), ` ${historyEntryText(h)}`)),
  );
  byId('card-result').textContent = resultText(card.result) ?? 'none';
}

/** Reads the open card and draws it; starts following its output while it has not ended. */
async function readDetail() {
  const o = opened;
  if (!o) return;
  try {
    const card = await getJson(cardPath(o.id), o.controller.signal);
    if (o !== opened) return;
    renderDetail(card);
    if (!isTerminalState(card.state)) {
      if (!o.streaming) void followOutput(o);
    } else if (!o.streaming) {
      // Ended: the tail the card keeps is its output (the same lines the stream sent, and any from before the page opened).
      showLines(o, tailLines(card.outputTail));
      setOutputState(o, 'ended');
    }
  } catch (err) {
    if (o === opened && !o.controller.signal.aborted) byId('card-summary').textContent = String(err.message ?? err);
  }
}

const readDetailSoon = coalesced(readDetail, CARDS_REFRESH_MIN_INTERVAL_MS);

/** One output stream until it closes; says whether it sent the run's end. */
async function readOutputOnce(o) {
  const res = await openStream(`${cardPath(o.id)}/output${o.lastId ? `?after=${encodeURIComponent(o.lastId)}` : ''}`, o.controller.signal);
  setOutputState(o, 'live');
  let ended = false;
  await readFrames(res, (frames) => {
    let lines = o.lines;
    for (const f of frames) {
      if (f.id) o.lastId = f.id;
      lines = keepLastLines(lines, outputLinesOf(f));
      if (f.event === 'end') ended = true;
    }
    showLines(o, lines);
  });
  return ended;
}

/** Follows the card's output until its run ends or the card is closed; the card is read again at the end. */
async function followOutput(o) {
  o.streaming = true;
  let ended = false;
  while (o === opened && !ended) {
    try {
      ended = await readOutputOnce(o);
      // Closed without an end entry: a drop (slow reader, Redis away), or a card that ended before it kept output.
      if (!ended) ended = isTerminalState((await getJson(cardPath(o.id), o.controller.signal)).state);
    } catch {
      if (o.controller.signal.aborted) break;
    }
    if (!ended && o === opened) {
      setOutputState(o, 'reconnecting');
      await sleep(OUTPUT_RECONNECT_DELAY_MS);
    }
  }
  o.streaming = false;
  if (o === opened) await readDetail();
}

export function closeCard() {
  opened?.controller.abort();
  opened = undefined;
  byId('card').hidden = true;
}

/** Opens a card in the panel (the one open before is closed). */
export function openCard(id) {
  closeCard();
  opened = { id, controller: new AbortController(), lines: [], lastId: undefined, streaming: false };
  const panel = byId('card');
  panel.dataset.card = id;
  panel.dataset.state = '';
  byId('card-title').replaceChildren(el('span', { class: 'mono' }, id));
  for (const part of ['card-summary', 'card-history', 'card-result']) byId(part).replaceChildren();
  showLines(opened, []);
  setOutputState(opened, 'loading');
  panel.hidden = false;
  panel.scrollIntoView?.({ block: 'nearest' });
  void readDetail();
}

/** A card event: the open card, if it is the one named, is read again soon (its history and state moved). */
export function cardPanelEvent(e) {
  if (opened && e.cardId === opened.id) readDetailSoon();
}
