// What every part of the status page uses to touch the DOM and the API. Text from the API goes into the
// DOM as text nodes only, never as markup: card text is untrusted. Requests ride the browser's
// credentials for this origin (the Basic auth it answered for `/`), as fetches do by default.
import { parseFrame } from './status-model.js';

/** An element with attributes and children; strings become text nodes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) if (v !== undefined) node.setAttribute(k, String(v));
  for (const c of children) if (c !== undefined && c !== null) node.append(typeof c === 'string' ? document.createTextNode(c) : c);
  return node;
}

export const fmtTime = (at) => (at ? new Date(at).toLocaleTimeString() : '');

export async function getJson(path, signal) {
  const res = await fetch(path, { headers: { accept: 'application/json' }, signal });
  if (!res.ok) throw new Error(`${path}: HTTP ${res.status}`);
  return res.json();
}

/** Opens a server-sent event stream (a fetch, so it carries the same credentials as every other read). */
export async function openStream(path, signal) {
  const res = await fetch(path, { headers: { accept: 'text/event-stream' }, signal });
  if (!res.ok || !res.body) throw new Error(`${path.split('?')[0]}: HTTP ${res.status}`);
  return res;
}

/** Reads a stream's frames until it ends, handing over each chunk's frames at once (so the page redraws once per chunk). */
export async function readFrames(res, onFrames) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buffer += value.replace(/\r\n?/g, '\n');
    const frames = [];
    for (let end = buffer.indexOf('\n\n'); end >= 0; end = buffer.indexOf('\n\n')) {
      frames.push(parseFrame(buffer.slice(0, end)));
      buffer = buffer.slice(end + 2);
    }
    if (frames.length) onFrames(frames);
  }
}

/**
 * `run` at most once per `minIntervalMs` and never twice at once, however often it is asked for: asks
 * that come while it waits or runs fold into one more run after it. `run` reports its own errors.
 */
export function coalesced(run, minIntervalMs) {
  let timer;
  let running = false;
  let again = false;
  let lastStartMs = Number.NEGATIVE_INFINITY;
  const start = async () => {
    timer = undefined;
    running = true;
    lastStartMs = Date.now();
    try {
      await run();
    } finally {
      running = false;
      if (again) {
        again = false;
        ask();
      }
    }
  };
  const ask = () => {
    if (running) again = true;
    else if (timer === undefined) timer = setTimeout(start, Math.max(0, lastStartMs + minIntervalMs - Date.now()));
  };
  return ask;
}

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
