import { createHash } from 'node:crypto';
import type { FastifyRequest } from 'fastify';

/** Who holds a stream, for the per-principal cap. Never the token itself: it may reach logs. */
export type PrincipalOf = (request: FastifyRequest) => string;

export const ANONYMOUS_PRINCIPAL = 'anonymous';

/** The token a request presents: a bearer token, or the password of HTTP Basic (the browser pages' way). */
function presentedToken(authorization: string | undefined): string | undefined {
  const [scheme = '', value = ''] = (authorization ?? '').split(' ', 2);
  if (scheme.toLowerCase() === 'bearer') return value.trim() || undefined;
  if (scheme.toLowerCase() === 'basic') {
    const decoded = Buffer.from(value, 'base64').toString('utf8');
    return decoded.slice(decoded.indexOf(':') + 1) || undefined;
  }
  return undefined;
}

/**
 * The default principal: the sha256 of the token the request presented (auth has already checked it),
 * or `anonymous` in open mode, where the headers are nobody's identity.
 */
export function tokenDigestPrincipal(openMode: boolean): PrincipalOf {
  return (request) => {
    if (openMode) return ANONYMOUS_PRINCIPAL;
    const token = presentedToken(request.headers.authorization);
    return token === undefined ? ANONYMOUS_PRINCIPAL : `sha256:${createHash('sha256').update(token).digest('hex')}`;
  };
}
