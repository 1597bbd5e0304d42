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
