import { randomUUID } from 'node:crypto';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import {
  CardListQuerySchema,
  CardValidationError,
  RetryBodySchema,
  UnblockBodySchema,
  defaults,
  evaluateCallbackTarget,
  parseCard,
  toIssues,
  type Card,
  type CallbackAllowRule,
  type ValidationIssue,
} from '@lanes/contracts';
import { describeLaneFull, type CardOutput, type CardStore, type LaneQueues } from '@lanes/queue';
import { ApiError, notFound, rateLimited } from '../api-error.js';
import type { CardRateLimiter } from '../edge/card-rate.js';
import { inScope, type Principal } from '../edge/principal.js';
import { inEnqueueSpan } from '../request-trace.js';

export interface CardRoutesDeps {
  queues: LaneQueues;
  store: CardStore;
  /** The card's output stream, for `outputTail`. */
  output?: CardOutput;
  newId?: () => string;
  /** LANES_CALLBACK_ALLOW: inward callback targets let through. */
  callbackAllow?: readonly CallbackAllowRule[];
  /** Each token's cards per second (card-rate.ts); absent: no token is limited. */
  cardRate?: CardRateLimiter;
  /**
   * The API's body limit: a post is charged by its size, from `content-length` before its body is
   * read, a full body as a full bulk (a body without a length counts as full). Absent: bodies are not
   * charged by size.
   */
  bodyLimitBytes?: number;
}

declare module 'fastify' {
  interface FastifyRequest {
    /** Cards this POST /v1/cards was charged for its body's size before it was read. */
    cardsChargedForBody?: number;
  }
}

/** Whether a POST /v1/cards body is a bulk (`{cards:[…]}`) rather than one card. */
function isBulkBody(body: unknown): body is { cards: unknown } {
  return body !== null && typeof body === 'object' && !Array.isArray(body) && 'cards' in body;
}

/** How many cards a POST /v1/cards body holds, read before it is validated (a body that is no card counts one). */
function cardsIn(body: unknown): number {
  return isBulkBody(body) && Array.isArray(body.cards) ? Math.max(1, body.cards.length) : 1;
}

/** A callbackUrl aimed inward (loopback, private, link-local, metadata) is refused before the card is taken. */
function callbackIssue(url: string, path: string, allow: readonly CallbackAllowRule[]): ValidationIssue | undefined {
  const parsed = new URL(url);
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') return { path, message: `must be an http or https URL, not ${parsed.protocol}` };
  const decision = evaluateCallbackTarget(parsed.hostname, parsed.hostname, allow);
  return decision.action === 'refuse' ? { path, message: `refused: ${decision.reason}` } : undefined;
}

/**
 * A card or `{cards:[…]}`; every card is validated before any is enqueued, so a batch is all or nothing.
 * A lane outside the principal's scope is refused exactly as a lane that does not exist (400 naming
 * the card's `lane`), so a token learns nothing of lanes it cannot see; one such card refuses the batch.
 */
function parseBody(body: unknown, principal: Principal, deps: CardRoutesDeps): { cards: Card[]; bulk: boolean } {
  const newId = deps.newId ?? (() => randomUUID());
  const isBulk = isBulkBody(body);
  const inputs: unknown[] = isBulk ? (body.cards as unknown[]) : [body];
  if (isBulk && (!Array.isArray(inputs) || inputs.length === 0)) {
    throw new CardValidationError([{ path: 'cards', message: 'must be a non-empty array of cards' }]);
  }
  if (inputs.length > defaults.MAX_BULK_CARDS) {
    throw new ApiError(413, 'BULK_TOO_LARGE', `at most ${defaults.MAX_BULK_CARDS} cards per request, got ${inputs.length}; split the batch`, [
      { path: 'cards', message: `must hold at most ${defaults.MAX_BULK_CARDS} cards` },
    ]);
  }
  const issues: ValidationIssue[] = [];
  const cards: Card[] = [];
  inputs.forEach((input, i) => {
    try {
      const card = parseCard(input, newId, isBulk ? ['cards', i] : []);
      if (!deps.queues.lane(card.lane) || !inScope(principal, card.lane)) {
        const known = deps.queues
          .all()
          .map((q) => q.name)
          .filter((lane) => inScope(principal, lane))
          .join(', ');
        issues.push({ path: isBulk ? `cards.${i}.lane` : 'lane', message: `unknown lane "${card.lane}" (known: ${known})` });
      }
      const refused = card.callbackUrl ? callbackIssue(card.callbackUrl, isBulk ? `cards.${i}.callbackUrl` : 'callbackUrl', deps.callbackAllow ?? []) : undefined;
      if (refused) issues.push(refused);
      cards.push(card);
    } catch (err) {
      if (err instanceof CardValidationError) issues.push(...err.issues);
      else throw err;
    }
  });
  const ids = new Set<string>();
  cards.forEach((c, i) => {
    if (ids.has(c.id)) issues.push({ path: isBulk ? `cards.${i}.id` : 'id', message: `duplicate id "${c.id}" in this request` });
    ids.add(c.id);
  });
  if (issues.length) throw new CardValidationError(issues);
  return { cards, bulk: isBulk };
}

export function cardRoutes(app: FastifyInstance, deps: CardRoutesDeps): void {
  const { queues, store } = deps;
  /** A card outside the principal's lanes answers 404 exactly as an unknown id does. */
  const assertVisible = async (request: FastifyRequest<{ Params: { id: string } }>) => {
    if (request.principal.lanes === '*') return;
    const lane = await store.lane(request.params.id);
    if (lane === undefined || !inScope(request.principal, lane)) throw notFound(`card ${request.params.id}`);
  };

  /** 429 RATE_LIMITED, with Retry-After, when the principal has posted its cards per second; nothing is read or written. */
  const chargeCards = async (request: FastifyRequest, reply: FastifyReply, want: number) => {
    if (want === 0) return;
    const taken = (await deps.cardRate?.take(request.principal, want)) ?? { ok: true };
    if (taken.ok) return;
    throw rateLimited(reply, request.principal.name, `post ${taken.perSecond} cards per second`, 'post again', taken.retryAfterMs);
  };

  /**
   * A body is charged by its size before it is read: parsing 16 MiB of JSON is the CPU every board
   * shares, and a card count alone let one token send a full body a hundred times a second.
   */
  const chargeBody = async (request: FastifyRequest, reply: FastifyReply) => {
    const limit = deps.bodyLimitBytes;
    if (limit === undefined) return;
    const length = Number(request.headers['content-length']);
    const bytes = Number.isFinite(length) && length >= 0 ? Math.min(length, limit) : limit;
    request.cardsChargedForBody = Math.max(1, Math.ceil((bytes * defaults.MAX_BULK_CARDS) / limit));
    await chargeCards(request, reply, request.cardsChargedForBody);
  };

  app.post('/v1/cards', { preParsing: chargeBody }, async (request, reply) => {
    // Its cards, less what its size already paid: counted before they are validated, the CPU the limit keeps for other boards.
    await chargeCards(request, reply, Math.max(0, Math.min(cardsIn(request.body), defaults.MAX_BULK_CARDS) - (request.cardsChargedForBody ?? 0)));
    const { cards, bulk } = parseBody(request.body, request.principal, deps);
    // Re-posting an id is idempotent only for the same card: an id already on another lane is a conflict.
    const out = await inEnqueueSpan(request, cards, () => queues.enqueueMany(cards));
    if (!out.ok && 'callbackBacklog' in out) {
      const { length, max, lane } = out.callbackBacklog;
      if (lane !== undefined) {
        throw new ApiError(
          503,
          'CALLBACK_BACKLOG',
          `${length} callbacks of lane "${lane}" wait for delivery (bound ${max} a lane): its cards with a callbackUrl are refused until its board's endpoint takes them`,
        );
      }
      throw new ApiError(503, 'CALLBACK_BACKLOG', `${length} callbacks wait for delivery (bound ${max}): cards with a callbackUrl are refused until the supervisor catches up`);
    }
    if (!out.ok && 'laneFull' in out) {
      const full = out.laneFull;
      const index = cards.findIndex((card) => card.lane === full.lane);
      const issue = { path: bulk ? `cards.${index}.lane` : 'lane', message: describeLaneFull(full) };
      throw new ApiError(429, 'LANE_FULL', `${issue.path}: ${issue.message}; nothing was queued, post again as cards end`, [issue]);
    }
    if (!out.ok) {
      // Ids are global, so a taken one cannot be hidden; the lane that holds it is named only in scope.
      const conflicts: ValidationIssue[] = out.conflicts.map((c) => ({
        path: bulk ? `cards.${c.index}.lane` : 'lane',
        message: inScope(request.principal, c.lane) ? `card ${c.id} already exists on lane "${c.lane}"` : `card id ${c.id} is already taken: choose another id`,
      }));
      throw new ApiError(409, 'CARD_CONFLICT', conflicts.map((c) => `${c.path}: ${c.message}`).join('; '), conflicts);
    }
    const results = out.results;
    if (!bulk) {
      const r = results[0]!;
      return reply.code(r.created ? 202 : 200).send({ id: r.id, state: r.state });
    }
    const anyCreated = results.some((r) => r.created);
    return reply.code(anyCreated ? 202 : 200).send({ cards: results.map((r) => ({ id: r.id, state: r.state, created: r.created })) });
  });

  // Newest update first, one page per request (CardList in @lanes/queue: O(page), and what paging
  // guarantees while cards move). A lane outside the token's scope is 404 by name, and never listed.
  app.get('/v1/cards', async (request) => {
    const parsed = CardListQuerySchema.safeParse(request.query ?? {});
    if (!parsed.success) {
      // An unknown parameter is named as the field it is (a typo such as ?status= must not list everything).
      const issues = parsed.error.issues.flatMap((issue): ValidationIssue[] =>
        issue.code === 'unrecognized_keys'
          ? issue.keys.map((key) => ({ path: key, message: 'is not a parameter of GET /v1/cards (lane, state, blockedReason, updatedSince, limit, cursor)' }))
          : toIssues(new z.ZodError([issue])),
      );
      throw new ApiError(400, 'QUERY_INVALID', issues.map((i) => `${i.path}: ${i.message}`).join('; '), issues);
    }
    const q = parsed.data;
    if (q.lane !== undefined && (!queues.lane(q.lane) || !inScope(request.principal, q.lane))) throw notFound(`lane ${q.lane}`);
    const lanes =
      q.lane !== undefined
        ? [q.lane]
        : queues
            .all()
            .map((queue) => queue.name)
            .filter((lane) => inScope(request.principal, lane));
    const out = await store.page({
      lanes,
      limit: q.limit,
      ...(q.lane !== undefined ? { lane: q.lane } : {}),
      ...(q.state !== undefined ? { state: q.state } : {}),
      ...(q.blockedReason !== undefined ? { blockedReason: q.blockedReason } : {}),
      ...(q.updatedSince !== undefined ? { updatedSinceMs: Date.parse(q.updatedSince) } : {}),
      ...(q.cursor !== undefined ? { cursor: q.cursor } : {}),
    });
    if (!out.ok) throw new ApiError(400, 'QUERY_INVALID', `${out.issue}: ${out.message}`, [{ path: out.issue, message: out.message }]);
    return out.page;
  });

  app.get<{ Params: { id: string } }>('/v1/cards/:id', async (request) => {
    const [record, outputTail] = await Promise.all([store.get(request.params.id), deps.output?.tail(request.params.id)]);
    if (!record || !inScope(request.principal, record.lane)) throw notFound(`card ${request.params.id}`);
    // The last CARD_OUTPUT_TAIL_BYTES of its output stay with the card (card-output.ts in @lanes/queue).
    return outputTail === undefined ? record : { ...record, outputTail };
  });

  app.post<{ Params: { id: string } }>('/v1/cards/:id/cancel', async (request, reply) => {
    await assertVisible(request);
    const out = await queues.cancel(request.params.id);
    if (!out.ok) throw out.code === 'CARD_NOT_FOUND' ? notFound(`card ${request.params.id}`) : new ApiError(409, out.code, out.message);
    return reply.code(202).send({ id: request.params.id, state: out.state });
  });

  // A failed or cancelled card queued again (LaneQueues.retry): 409 CARD_STATE from any other state,
  // 409 CARD_BUSY while a run is still ending its job.
  app.post<{ Params: { id: string } }>('/v1/cards/:id/retry', async (request, reply) => {
    await assertVisible(request);
    await chargeCards(request, reply, 1);
    const parsed = RetryBodySchema.safeParse(request.body ?? {});
    if (!parsed.success) throw new ApiError(400, 'BODY_INVALID', 'invalid retry body', toIssues(parsed.error));
    const out = await queues.retry(request.params.id, parsed.data.reason);
    if (!out.ok && out.code === 'LANE_FULL') throw new ApiError(429, out.code, out.message);
    if (!out.ok) throw out.code === 'CARD_NOT_FOUND' ? notFound(`card ${request.params.id}`) : new ApiError(409, out.code, out.message);
    return reply.code(202).send({ id: request.params.id, state: out.state });
  });

  app.post<{ Params: { id: string } }>('/v1/cards/:id/unblock', async (request, reply) => {
    await assertVisible(request);
    const parsed = UnblockBodySchema.safeParse(request.body ?? {});
    if (!parsed.success) throw new ApiError(400, 'BODY_INVALID', 'invalid unblock body', toIssues(parsed.error));
    const out = await queues.unblock(request.params.id, parsed.data.note);
    if (!out.ok) throw out.code === 'CARD_NOT_FOUND' ? notFound(`card ${request.params.id}`) : new ApiError(409, out.code, out.message);
    return reply.code(202).send({ id: request.params.id, state: out.state });
  });
}
