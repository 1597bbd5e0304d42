import { hasRole, type Principal } from './principal.js';

/** Methods that change nothing. Anything else is a mutation. */
export const SAFE_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

export type AccessDecision = { action: 'allow' } | { action: 'forbid'; reason: string };

/**
 * What a principal may reach by route (lane scope is the handlers' part: out of scope reads as 404).
 *
 * | route                          | needs                                         |
 * |--------------------------------|-----------------------------------------------|
 * | mutation under /v1             | role write or admin                           |
 * | /metrics                       | lanes "*" (its series cover every lane)       |
 * | /admin/queues (Bull Board) GET | lanes "*" (it shows every lane's jobs)        |
 * | /admin/queues mutation         | lanes "*" and role admin                      |
 * | anything else                  | any valid token                               |
 */
export function evaluateAccess(principal: Principal, request: { method: string; path: string }): AccessDecision {
  const mutation = !SAFE_METHODS.has(request.method);
  if (request.path === '/metrics' || request.path.startsWith('/admin')) {
    if (principal.lanes !== '*')
      return { action: 'forbid', reason: `token "${principal.name}" is scoped to some lanes; ${request.path === '/metrics' ? '/metrics' : 'Bull Board'} covers every lane` };
    if (mutation && !hasRole(principal, 'admin')) return { action: 'forbid', reason: `Bull Board changes need an admin token; "${principal.name}" is ${principal.role}` };
    return { action: 'allow' };
  }
  if (mutation && request.path.startsWith('/v1/') && !hasRole(principal, 'write')) {
    return { action: 'forbid', reason: `${request.method} ${request.path} needs a write token; "${principal.name}" is ${principal.role}` };
  }
  return { action: 'allow' };
}
