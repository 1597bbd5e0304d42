import { SAFE_METHODS } from './access.js';

/** The request as the edge sees it: method, path and the few headers it reads. */
export interface EdgeRequest {
  method: string;
  path: string;
  headers: {
    host?: string | undefined;
    origin?: string | undefined;
    'sec-fetch-site'?: string | undefined;
    'sec-fetch-mode'?: string | undefined;
    'content-type'?: string | undefined;
  };
}

export type EdgeDecision = { action: 'pass' } | { action: 'refuse'; status: 403 | 415 | 421; code: 'HOST_NOT_LOOPBACK' | 'CROSS_SITE' | 'UNSUPPORTED_MEDIA_TYPE'; reason: string };

const LOOPBACK_NAMES = new Set(['localhost', '127.0.0.1', '::1']);

/** The host name of a Host header value (`name`, `name:port`, `[v6]`, `[v6]:port`), lower-cased. */
export function hostName(host: string): string {
  const h = host.trim().toLowerCase();
  if (h.startsWith('[')) return h.slice(1, h.indexOf(']') > 0 ? h.indexOf(']') : undefined);
  const colon = h.lastIndexOf(':');
  return colon >= 0 ? h.slice(0, colon) : h;
}

/** localhost, 127.0.0.1 or [::1], with any port: the only Host names open mode answers. */
export function isLoopbackHost(host: string | undefined): boolean {
  return host !== undefined && LOOPBACK_NAMES.has(hostName(host));
}

/** `Origin`'s host:port as a Host header would carry it (default ports dropped), or undefined for `null` and junk. */
function originHost(origin: string): string | undefined {
  try {
    const url = new URL(origin);
    return url.host || undefined;
  } catch {
    return undefined;
  }
}

/** A Host header with the scheme's default port dropped, as URL.host does. */
function normalHost(host: string): string {
  return host
    .trim()
    .toLowerCase()
    .replace(/:(80|443)$/, '');
}

/** `application/json`, with or without parameters (`; charset=utf-8`). */
export function isJsonMediaType(contentType: string | undefined): boolean {
  return contentType?.split(';')[0]?.trim().toLowerCase() === 'application/json';
}

/**
 * The browser edge, before auth, in this order:
 * 1. Open mode (no tokens) answers loopback Host names only, so a DNS-rebinding page cannot reach it: 421 HOST_NOT_LOOPBACK.
 * 2. Cross-site requests are refused: `Sec-Fetch-Site: cross-site`, or an `Origin` whose host:port is not the `Host`: 403 CROSS_SITE.
 *    A top-level GET navigation (a link to the status page) is let through: it carries no Origin and changes nothing.
 * 3. A mutation under /v1 must say `content-type: application/json` (a body may be empty): 415 UNSUPPORTED_MEDIA_TYPE.
 *    HTML forms can send only urlencoded, multipart or text/plain without a CORS preflight, so none reaches a handler.
 */
export function evaluateEdge(request: EdgeRequest, config: { open: boolean }): EdgeDecision {
  const { host, origin } = request.headers;
  if (config.open && !isLoopbackHost(host)) {
    return { action: 'refuse', status: 421, code: 'HOST_NOT_LOOPBACK', reason: `open mode (no API tokens) answers localhost, 127.0.0.1 and [::1] only, not Host "${host ?? ''}"` };
  }
  const safe = SAFE_METHODS.has(request.method);
  const navigation = safe && request.headers['sec-fetch-mode'] === 'navigate';
  if (request.headers['sec-fetch-site'] === 'cross-site' && !navigation) {
    return { action: 'refuse', status: 403, code: 'CROSS_SITE', reason: 'cross-site requests are refused (Sec-Fetch-Site: cross-site)' };
  }
  if (origin !== undefined && (host === undefined || originHost(origin) !== normalHost(host))) {
    return { action: 'refuse', status: 403, code: 'CROSS_SITE', reason: `cross-origin requests are refused (Origin ${origin} is not Host ${host ?? ''})` };
  }
  if (!safe && request.path.startsWith('/v1/') && !isJsonMediaType(request.headers['content-type'])) {
    return { action: 'refuse', status: 415, code: 'UNSUPPORTED_MEDIA_TYPE', reason: `${request.method} ${request.path} needs content-type: application/json` };
  }
  return { action: 'pass' };
}

export type BindDecision = { action: 'bind' } | { action: 'refuse'; reason: string };

/** Open mode (no tokens) listens on loopback only: 127.0.0.0/8, ::1 or localhost. */
export function evaluateBind(host: string, config: { open: boolean }): BindDecision {
  const h = host
    .trim()
    .toLowerCase()
    .replace(/^\[(.*)\]$/, '$1');
  const loopback = h === 'localhost' || h === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
  if (!config.open || loopback) return { action: 'bind' };
  return {
    action: 'refuse',
    reason: `refusing to listen on ${host} with no API tokens: anyone who can reach it could enqueue and cancel cards. Set LANES_API_TOKENS (or config "tokens"), or listen on 127.0.0.1 (LANES_HOST)`,
  };
}
