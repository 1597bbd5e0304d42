import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError } from './api-error.js';

/** Paths a load balancer probes without credentials. */
const OPEN_PATHS = new Set(['/healthz', '/readyz']);

const digest = (s: string) => createHash('sha256').update(s).digest();

/**
 * Pages a person opens in a browser: refused with a Basic challenge, so the browser asks for the token
 * (as the password) once and sends it on for everything the page then fetches from this origin.
 */
const isBrowserPage = (path: string) => path === '/' || path.startsWith('/admin') || path.startsWith('/status-page/');

/**
 * Bearer-token auth, compared in constant time (hashing first makes lengths equal, so the
 * comparison leaks neither content nor length). The dashboard also accepts HTTP Basic with the
 * token as password, so a browser can reach Bull Board and the status page behind the same tokens.
 */
export function createAuthHook(tokens: readonly string[]) {
  const expected = tokens.map(digest);
  const matches = (candidate: string) => {
    const d = digest(candidate);
    let ok = false;
    for (const e of expected) ok = timingSafeEqual(d, e) || ok;
    return ok;
  };
  return async function authHook(request: FastifyRequest, reply: FastifyReply): Promise<void> {
    if (expected.length === 0) return;
    const path = request.url.split('?')[0] ?? '';
    if (OPEN_PATHS.has(path)) return;
    const header = request.headers.authorization ?? '';
    const [scheme, value = ''] = header.split(' ', 2);
    let candidate: string | undefined;
    if (scheme?.toLowerCase() === 'bearer') candidate = value.trim();
    if (scheme?.toLowerCase() === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      candidate = decoded.slice(decoded.indexOf(':') + 1);
    }
    if (candidate !== undefined && matches(candidate)) return;
    if (isBrowserPage(path)) reply.header('www-authenticate', 'Basic realm="lanes"');
    throw new ApiError(401, 'UNAUTHORIZED', 'missing or invalid API token');
  };
}

/** LANES_API_TOKENS: comma-separated; empty or unset means open (local use only). */
export function parseTokens(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}
