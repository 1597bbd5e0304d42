import type { FastifyReply, FastifyRequest } from 'fastify';
import { ApiError, rateLimited, refuse } from './api-error.js';
import { evaluateAccess } from './edge/access.js';
import { identify, type ApiToken } from './edge/api-tokens.js';
import { evaluateEdge } from './edge/browser-edge.js';
import { ANONYMOUS_PRINCIPAL, OPEN_PRINCIPAL } from './edge/principal.js';
import type { RequestRateLimiter } from './edge/request-rate.js';

/** Paths a load balancer probes without credentials. */
const OPEN_PATHS = new Set(['/healthz', '/readyz']);

/**
 * Pages a person opens in a browser: refused with a Basic challenge, so the browser asks for the token
 * (as the password) once and sends it on for everything the page then fetches from this origin.
 */
const isBrowserPage = (path: string) => path === '/' || path.startsWith('/admin') || path.startsWith('/status-page/');

/**
 * The path every rule here reads: the route the router matched, as it was declared
 * (`/v1/cards/:id/cancel`), never the raw URL. The router decodes percent-escapes before it
 * matches, so `/%761/cards` reaches POST /v1/cards and `/%61dmin/...` Bull Board: a rule read off the
 * raw URL would let a read token write, or a lane's token into every lane. A request that matches
 * no route keeps its raw path; it reaches the 404 handler only.
 */
const routePathOf = (request: FastifyRequest): string => request.routeOptions.url ?? request.url.split('?')[0] ?? '';

/** The browser edge (evaluateEdge): Host in open mode, cross-site, JSON mutations. Runs before auth. */
export function createEdgeHook(config: { open: boolean }) {
  return async function edgeHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const decision = evaluateEdge({ method: request.method, path: routePathOf(request), headers: request.headers as Record<string, string | undefined> }, config);
    if (decision.action === 'refuse') return refuse(reply, new ApiError(decision.status, decision.code, decision.reason));
    return undefined;
  };
}

/**
 * Bearer-token auth. The token that matches becomes `request.principal` (name, role, lanes), and the
 * request's logs carry `token: <name>`, never the value. The dashboard also accepts HTTP Basic with
 * the token as password, so a browser can reach Bull Board and the status page behind the same
 * tokens. What the principal may reach by route is evaluateAccess (403 FORBIDDEN); lane scope is
 * the handlers' (404). With no tokens, every request is OPEN_PRINCIPAL.
 */
export function createAuthHook(tokens: readonly ApiToken[]) {
  return async function authHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    if (tokens.length === 0) {
      request.principal = OPEN_PRINCIPAL;
      return undefined;
    }
    request.principal = ANONYMOUS_PRINCIPAL;
    const path = routePathOf(request);
    if (OPEN_PATHS.has(path)) return undefined;
    const header = request.headers.authorization ?? '';
    const [scheme, value = ''] = header.split(' ', 2);
    let candidate: string | undefined;
    if (scheme?.toLowerCase() === 'bearer') candidate = value.trim();
    if (scheme?.toLowerCase() === 'basic') {
      const decoded = Buffer.from(value, 'base64').toString('utf8');
      candidate = decoded.slice(decoded.indexOf(':') + 1);
    }
    const token = candidate !== undefined ? identify(tokens, candidate) : undefined;
    if (!token) {
      if (isBrowserPage(path)) reply.header('www-authenticate', 'Basic realm="lanes"');
      return refuse(reply, new ApiError(401, 'UNAUTHORIZED', 'missing or invalid API token'));
    }
    const { digest: _digest, ...principal } = token;
    request.principal = principal;
    request.log = request.log.child({ token: token.name });
    reply.log = request.log;
    const access = evaluateAccess(request.principal, { method: request.method, path });
    if (access.action === 'forbid') return refuse(reply, new ApiError(403, 'FORBIDDEN', access.reason));
    return undefined;
  };
}

/**
 * A config token past its `requestsPerSecond` in this process: 429 RATE_LIMITED with Retry-After,
 * before the handler runs (a post's body is not read). Runs after auth, so it counts only requests
 * a token made, and what a token may not reach was refused already.
 */
export function createRequestRateHook(limiter: RequestRateLimiter) {
  return async function requestRateHook(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply | undefined> {
    const taken = limiter.take(request.principal);
    if (taken.ok) return undefined;
    request.log.warn({ event: 'request.rate_limited', retryAfterMs: taken.retryAfterMs }, 'token past its requestsPerSecond');
    return refuse(reply, rateLimited(reply, request.principal.name, `make ${taken.perSecond} requests per second`, 'ask again', taken.retryAfterMs));
  };
}

/** LANES_API_TOKENS: comma-separated; empty or unset means open (local use only). */
export function parseTokens(raw: string | undefined): string[] {
  return (raw ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);
}
