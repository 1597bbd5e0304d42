// Each lane's running and recent cards on the status page: read from `GET /v1/cards` (two O(page)
// reads per lane), and read again when a card event names the lane, at most once per
// CARDS_REFRESH_MIN_INTERVAL_MS however many events come. A card's id opens it (card-panel.js).
import { ageText, cardListPaths, cardStateText, CARDS_REFRESH_MIN_INTERVAL_MS, mergeCardLists } from './cards-model.js';
import { coalesced, el, getJson } from './page-kit.js';

/** Per lane: the cards listed, or the error its last read met. */
const lists = new Map();
const dirty = new Set();
let changed = () => undefined;

async function readDirty() {
  const lanes = [...dirty];
  dirty.clear();
  for (const lane of lanes) {
    try {
      const paths = cardListPaths(lane);
      const [running, recent] = await Promise.all([getJson(paths.running), getJson(paths.recent)]);
      lists.set(lane, { cards: mergeCardLists(running.cards, recent.cards) });
    } catch (err) {
      lists.set(lane, { cards: lists.get(lane)?.cards ?? [], error: String(err.message ?? err) });
    }
  }
  changed();
}

const readSoon = coalesced(readDirty, CARDS_REFRESH_MIN_INTERVAL_MS);

/** `onChange` redraws the page after a read. */
export function initLaneCards(onChange) {
  changed = onChange;
}

/** These lanes' lists are read again soon (one read however many ask). */
export function laneCardsChanged(lanes) {
  for (const lane of lanes) dirty.add(lane);
  if (dirty.size) readSoon();
}

/** Lanes not read yet: a first load reads them, later events and the backstop keep them fresh. */
export function lanesNotListed(lanes) {
  return lanes.filter((lane) => !lists.has(lane));
}

function renderCardRow(c, nowMs) {
  return el(
    'tr',
    { class: 'card-row', 'data-card': c.id, 'data-state': c.state },
    el('td', {}, el('button', { type: 'button', class: 'mono open-card', 'data-open-card': c.id }, c.id)),
    el('td', { class: 'title' }, c.title),
    el('td', { class: `state card-state-${c.state}` }, cardStateText(c)),
    el('td', { class: 'attempts' }, String(c.attempts)),
    el('td', { class: 'age', title: c.createdAt }, ageText(c.createdAt, nowMs)),
    el('td', { class: 'reason' }, c.blockedReason ? `${c.blockedReason}${c.blockedMessage ? `: ${c.blockedMessage}` : ''}` : ''),
  );
}

/** The lane's cards as a table (running first, then the latest), or undefined before the first read. */
export function renderLaneCards(lane, nowMs) {
  const list = lists.get(lane);
  if (!list) return undefined;
  const error = list.error ? el('p', { class: 'cards-error', role: 'alert' }, `cards: ${list.error}`) : undefined;
  if (!list.cards.length) return el('div', { class: 'lane-cards', 'data-lane-cards': lane }, error, el('p', { class: 'empty' }, 'no cards yet'));
  const head = el('tr', {}, ...['card', 'title', 'state', 'attempts', 'age', 'blocked reason'].map((h) => el('th', {}, h)));
  return el(
    'div',
    { class: 'lane-cards', 'data-lane-cards': lane },
    error,
    el('table', { class: 'cards' }, el('caption', {}, 'running and latest cards'), head, ...list.cards.map((c) => renderCardRow(c, nowMs))),
  );
}
