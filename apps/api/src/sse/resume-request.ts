import type { FastifyRequest } from 'fastify';
import type { z } from 'zod';
import { StreamIdSchema, toIssues, type ValidationIssue } from '@lanes/contracts';
import { ApiError } from '../api-error.js';

/**
 * A stream request's query, validated by `schema`, and its `Last-Event-ID` header, the resume id a
 * browser sends on reconnect (it wins over any resume field of the query). Every invalid part is
 * named in one 400 QUERY_INVALID.
 */
export function parseResumeRequest<S extends z.ZodType>(request: FastifyRequest, schema: S): { query: z.infer<S>; lastEventId: string | undefined } {
  const issues: ValidationIssue[] = [];
  const query = schema.safeParse(request.query ?? {});
  if (!query.success) issues.push(...toIssues(query.error));
  const header = request.headers['last-event-id'];
  const lastEventId = header === undefined ? undefined : StreamIdSchema.safeParse(header);
  if (lastEventId && !lastEventId.success) issues.push(...toIssues(lastEventId.error, ['last-event-id']));
  if (issues.length || !query.success) {
    throw new ApiError(400, 'QUERY_INVALID', issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues);
  }
  return { query: query.data, lastEventId: lastEventId?.data };
}
