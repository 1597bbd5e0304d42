import type { FastifyReply } from 'fastify';
import type { ErrorBody, ValidationIssue } from '@lanes/contracts';

/** An error the API answers with a stable code and status, as `{error:{code,message,issues?}}`. */
export class ApiError extends Error {
  constructor(
    readonly statusCode: number,
    readonly code: string,
    message: string,
    readonly issues?: ValidationIssue[],
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export const notFound = (what: string) => new ApiError(404, 'NOT_FOUND', `${what} not found`);

/**
 * 429 RATE_LIMITED for a token past one of its rates, with `Retry-After` set on the reply in whole
 * seconds (at least one): `${token} may ${allowance}; ${again} in N s`.
 */
export function rateLimited(reply: FastifyReply, token: string, allowance: string, again: string, retryAfterMs: number): ApiError {
  const seconds = Math.max(1, Math.ceil(retryAfterMs / 1_000));
  reply.header('retry-after', String(seconds));
  return new ApiError(429, 'RATE_LIMITED', `token "${token}" may ${allowance}; ${again} in ${seconds} s`);
}

export function errorBody(code: string, message: string, issues?: ErrorBody['error']['issues']): ErrorBody {
  return { error: { code, message, ...(issues?.length ? { issues } : {}) } };
}

/**
 * Answers an ApiError from a hook. The hook answers itself rather than throwing: a plugin with an
 * error handler of its own (Bull Board) would otherwise answer in its shape, not `{error:{code,message}}`.
 */
export function refuse(reply: FastifyReply, err: ApiError): FastifyReply {
  return reply.code(err.statusCode).send(errorBody(err.code, err.message, err.issues));
}
