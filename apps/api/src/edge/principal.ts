import type { TokenRole } from '@lanes/contracts';

/** Who is asking: the token that matched (by name, never by value), its role and its lanes. */
export interface Principal {
  readonly name: string;
  readonly role: TokenRole;
  /** `'*'`: every lane, present and future. */
  readonly lanes: '*' | ReadonlySet<string>;
  /** Cards per second it may post (card-rate.ts); absent: not limited (the operator's admin tokens, open mode). */
  readonly cardsPerSecond?: number;
  /** Requests per second it may make, per API process (request-rate.ts); absent: not limited. */
  readonly requestsPerSecond?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every request it lets through; open mode is an admin over every lane. */
    principal: Principal;
  }
}

/** No tokens configured: local use only (loopback Host names), with every right. */
export const OPEN_PRINCIPAL: Principal = { name: 'open', role: 'admin', lanes: '*' };

/** A request to a path open to all (/healthz, /readyz) while tokens are configured: no lane, no right. */
export const ANONYMOUS_PRINCIPAL: Principal = { name: 'anonymous', role: 'read', lanes: new Set() };

const RANK: Record<TokenRole, number> = { read: 0, write: 1, admin: 2 };

/** Whether the principal may see the lane. Anything outside answers exactly as if it did not exist (404). */
export function inScope(principal: Principal, lane: string): boolean {
  return principal.lanes === '*' || principal.lanes.has(lane);
}

/** Roles include the ones below them: admin ⊃ write ⊃ read. */
export function hasRole(principal: Principal, role: TokenRole): boolean {
  return RANK[principal.role] >= RANK[role];
}
