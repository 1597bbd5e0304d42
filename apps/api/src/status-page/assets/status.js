// The status page: reads /v1/lanes, follows /v1/events, and redraws (cards: lane-cards.js, card-panel.js). Every text from the API (card ids,
// reasons, lane names) goes into the DOM as text nodes, never as markup: card text is untrusted.
// Requests ride the browser's credentials for this origin (the Basic auth it answered for `/`).
import { cardPanelEvent, closeCard, openCard } from './card-panel.js';
import { isCardEvent } from './cards-model.js';
import { initLaneCards, laneCardsChanged, lanesNotListed, renderLaneCards } from './lane-cards.js';
import { el, fmtTime, getJson, openStream, readFrames } from './page-kit.js';
import {
  applyEvent,
  blockedByReason,
  lanesWithBlocked,
  withBlocked,
  countsOf,
  deathOf,
  emptyModel,
  eventOf,
  exitCodeText,
  recentStreamId,
  sandboxView,
  sandboxesToLookUp,
  withDeathRecord,
  withLanes,
} from './status-model.js';

/** Events come in bursts (a card's lifecycle, a replay on load): one read of /v1/lanes per burst. */
const REFRESH_DEBOUNCE_MS = 200;
/** A dropped event stream is reopened after this, resuming from the last id seen. */
const RECONNECT_DELAY_MS = 1_000;
/** Some changes come with no event (a worker's liveness, a breaker's retry time running out, a card's age): read again this often. */
const BACKSTOP_REFRESH_MS = 10_000;

let model = emptyModel();
const lookedUp = new Set();
let refreshTimer;

function showError(message) {
  const box = document.getElementById('error');
  box.textContent = message ?? '';
  box.hidden = !message;
}

function setStream(state) {
  const badge = document.getElementById('stream');
  badge.dataset.state = state;
  badge.textContent = state === 'live' ? 'live' : state;
}

function renderSlot(lane, slot) {
  const death = deathOf(model, lane.name, slot.slot);
  const view = sandboxView(slot, death);
  const exit = view.state === 'dead' || view.state === 'respawning' ? `exit ${exitCodeText(view.observedExitCode)}` : '';
  const lastDeath =
    death && view.state === 'live' && death.sandboxId !== view.id
      ? el('div', { class: 'last-death' }, `last death: ${death.sandboxId ?? '?'} exit ${exitCodeText(death.observedExitCode)} ${fmtTime(death.at)}`)
      : undefined;
  return el(
    'tr',
    { class: 'slot', 'data-slot': `${lane.name}/${slot.slot}`, 'data-state': view.state, 'data-sandbox-id': view.id ?? '' },
    el('td', {}, slot.slot),
    el('td', {}, el('span', { class: `state state-${view.state}` }, view.state)),
    el('td', { class: 'mono sandbox-id' }, view.id ?? ''),
    el('td', { class: 'mono' }, view.pid !== undefined ? String(view.pid) : ''),
    el('td', { class: 'exit' }, exit),
    el('td', { class: 'reason' }, view.reason ?? '', lastDeath),
    el('td', { class: 'mono card' }, slot.cardId ? openButton(slot.cardId) : ''),
    el('td', { class: 'mono worker' }, `${slot.worker}${slot.workerLiveness && slot.workerLiveness !== 'alive' ? ` (${slot.workerLiveness})` : ''}`),
  );
}

/** A card's id as the button that opens it in the card panel (one click handler for the page, below). */
const openButton = (id) => el('button', { type: 'button', class: 'mono open-card', 'data-open-card': id }, id);

/** How the lane fences its agents; a lane that can only run trusted agents says so, and why (README "Threat model"). */
function renderIsolation(isolation) {
  const text = isolation.trustedAgentsOnly ? `trusted agents only (${isolation.mode})` : `agents isolated (${isolation.mode})`;
  return el('span', { class: `badge isolation-${isolation.trustedAgentsOnly ? 'trusted-only' : 'isolated'}`, 'data-isolation': isolation.mode, title: isolation.why ?? '' }, text);
}

function renderLane(lane) {
  const { states, blocked } = countsOf(lane);
  const breaker = lane.breaker ?? { state: 'closed', failures: 0 };
  return el(
    'section',
    { class: 'lane', 'data-lane': lane.name },
    el(
      'h2',
      {},
      lane.name,
      ' ',
      el('span', { class: 'provider' }, lane.provider),
      ' ',
      el(
        'span',
        { class: `badge breaker-${breaker.state}` },
        `breaker ${breaker.state}${breaker.failures ? ` (${breaker.failures} failures)` : ''}${breaker.state !== 'closed' && breaker.retryAt ? ` until ${fmtTime(breaker.retryAt)}` : ''}`,
      ),
      ' ',
      el('span', { class: `badge outage-${lane.outage ? 'yes' : 'no'}` }, lane.outage ? 'provider outage' : 'no outage'),
      ' ',
      el('span', { class: 'badge' }, `desired slots ${lane.desiredSlots}`),
      ...(lane.isolation ? [' ', renderIsolation(lane.isolation)] : []),
    ),
    el('table', { class: 'counts' }, el('tr', {}, ...states.map(([s]) => el('th', {}, s))), el('tr', {}, ...states.map(([s, n]) => el('td', { 'data-count': s }, String(n))))),
    el(
      'div',
      { class: 'blocked' },
      'blocked by reason: ',
      blocked.length ? el('ul', {}, ...blocked.map(([reason, n]) => el('li', { 'data-blocked': reason }, `${reason}: ${n}`))) : 'none',
    ),
    renderBlockedCards(model.blocked[lane.name]),
    renderLaneCards(lane.name, Date.now()),
    el(
      'table',
      { class: 'slots' },
      el('tr', {}, ...['slot', 'sandbox', 'sandbox id', 'pid', 'exit', 'reason', 'card', 'worker'].map((h) => el('th', {}, h))),
      ...lane.slots.map((s) => renderSlot(lane, s)),
    ),
  );
}

/** The blocked cards themselves, by reason: id, title and the message (an agent's own words for needs-human). */
function renderBlockedCards(list) {
  if (!list?.cards.length) return undefined;
  return el(
    'div',
    { class: 'blocked-cards' },
    ...blockedByReason(list.cards).map(([reason, cards]) =>
      el(
        'details',
        { open: '', 'data-blocked-reason': reason },
        el('summary', {}, `${reason} (${cards.length})`),
        el(
          'ul',
          {},
          ...cards.map((c) =>
            el(
              'li',
              { class: 'blocked-card', 'data-card': c.id },
              openButton(c.id),
              c.title ? ` ${c.title}` : '',
              c.message ? el('span', { class: 'message' }, ` — ${c.message}`) : '',
              el('time', {}, ` since ${fmtTime(c.since)}`),
            ),
          ),
        ),
      ),
    ),
    list.total > list.cards.length ? el('p', {}, `…and ${list.total - list.cards.length} more`) : undefined,
  );
}

function renderVerdicts() {
  const list = document.getElementById('verdicts');
  list.replaceChildren(
    ...model.verdicts.map((v) =>
      el(
        'li',
        { class: `verdict verdict-${v.verdict}`, 'data-verdict': v.verdict },
        el('time', {}, fmtTime(v.at)),
        ' ',
        el('strong', {}, v.verdict),
        ` ${v.lane}${v.slot ? `/${v.slot}` : ''}`,
        v.cardId ? ` card ${v.cardId}` : '',
        v.sandboxId ? ` sandbox ${v.sandboxId}` : '',
        v.observedExitCode !== undefined ? ` exit ${exitCodeText(v.observedExitCode)}` : '',
        v.reason ? `: ${v.reason}` : '',
      ),
    ),
  );
  if (!model.verdicts.length) list.append(el('li', { class: 'empty' }, 'none yet'));
}

function render() {
  document.getElementById('lanes').replaceChildren(...model.lanes.map(renderLane));
  renderVerdicts();
  document.getElementById('updated').textContent = `updated ${new Date().toLocaleTimeString()}`;
}

/** Why a dead sandbox died, from its record, for deaths that happened before the page opened. */
async function lookUpDeaths() {
  for (const id of sandboxesToLookUp(model)) {
    if (lookedUp.has(id)) continue;
    lookedUp.add(id);
    try {
      model = withDeathRecord(model, await getJson(`/v1/sandboxes/${encodeURIComponent(id)}`));
    } catch {
      // No record (yet): the slot still shows the exit code it carries.
    }
  }
}

/** The blocked cards of every lane that has any; a lane with none is cleared. */
async function readBlocked() {
  const wanted = new Set(lanesWithBlocked(model));
  for (const lane of Object.keys(model.blocked)) if (!wanted.has(lane)) model = withBlocked(model, lane, undefined);
  for (const lane of wanted) model = withBlocked(model, lane, await getJson(`/v1/lanes/${encodeURIComponent(lane)}/blocked`));
}

async function refresh() {
  try {
    const body = await getJson('/v1/lanes');
    model = withLanes(model, body.lanes);
    laneCardsChanged(lanesNotListed(model.lanes.map((l) => l.name)));
    await lookUpDeaths();
    await readBlocked();
    showError(undefined);
  } catch (err) {
    showError(String(err.message ?? err));
  }
  render();
}

function scheduleRefresh() {
  clearTimeout(refreshTimer);
  refreshTimer = setTimeout(refresh, REFRESH_DEBOUNCE_MS);
}

/** Applies one frame's event to the model; says whether anything changed (the caller redraws once per chunk). */
function onFrame(frame) {
  const event = eventOf(frame);
  if (!event) return false;
  const next = applyEvent(model, event);
  model = next.model;
  if (next.refresh) scheduleRefresh();
  if (isCardEvent(event)) {
    laneCardsChanged([event.lane]);
    cardPanelEvent(event);
  }
  return true;
}

/** Follows /v1/events for good: reads frames as they come, and reopens from the last id after a drop. */
async function follow() {
  let since = recentStreamId(Date.now());
  for (;;) {
    try {
      const res = await openStream(`/v1/events?since=${encodeURIComponent(since)}`);
      setStream('live');
      await readFrames(res, (frames) => {
        let changed = false;
        for (const frame of frames) {
          if (frame.id) since = frame.id;
          changed = onFrame(frame) || changed;
        }
        // One redraw per chunk read: a replay of many events on load draws once, not once per event.
        if (changed) render();
      });
    } catch (err) {
      showError(String(err.message ?? err));
    }
    setStream('reconnecting');
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAY_MS));
    scheduleRefresh();
  }
}

// Every card id on the page opens that card; the panel's close button closes it.
document.addEventListener('click', (e) => {
  const id = e.target.closest?.('[data-open-card]')?.dataset.openCard;
  if (id) openCard(id);
});
document.getElementById('card-close').addEventListener('click', closeCard);
initLaneCards(render);
render();
void refresh();
void follow();
setInterval(() => {
  scheduleRefresh();
  laneCardsChanged(model.lanes.map((l) => l.name));
}, BACKSTOP_REFRESH_MS);
