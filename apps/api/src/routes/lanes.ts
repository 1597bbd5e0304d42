import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { ApiError, notFound } from '../api-error.js';
import { inScope } from '../edge/principal.js';
import { laneScale } from '../lane-scale.js';
import { laneStatuses, type LaneStatusDeps } from '../lane-status.js';

/** Blocked cards listed per request: enough for a page, bounded for a lane with thousands. */
export const DEFAULT_BLOCKED_LIMIT = 50;
export const MAX_BLOCKED_LIMIT = 500;

const blockedLimitOf = (raw: string | undefined) => {
  if (raw === undefined) return DEFAULT_BLOCKED_LIMIT;
  const n = Number(raw);
  if (!Number.isInteger(n) || n < 1 || n > MAX_BLOCKED_LIMIT) throw new ApiError(400, 'BAD_REQUEST', `limit must be an integer from 1 to ${MAX_BLOCKED_LIMIT}`);
  return n;
};

export function laneRoutes(app: FastifyInstance, deps: LaneStatusDeps & { redis: Redis }): void {
  // A lane outside the token's scope is not listed, and answers 404 as an unknown lane does.
  app.get('/v1/lanes', async (request) => ({ lanes: await laneStatuses({ ...deps, lanes: deps.lanes.filter((l) => inScope(request.principal, l.name)) }) }));

  app.get<{ Params: { id: string } }>('/v1/sandboxes/:id', async (request) => {
    const record = await deps.fleet.sandbox(request.params.id);
    if (!record || !inScope(request.principal, record.lane)) throw notFound(`sandbox ${request.params.id}`);
    return record;
  });

  app.get<{ Params: { name: string } }>('/v1/lanes/:name', async (request) => {
    const lanes = await laneStatuses({ ...deps, lanes: deps.lanes.filter((l) => l.name === request.params.name && inScope(request.principal, l.name)) });
    if (!lanes[0]) throw notFound(`lane ${request.params.name}`);
    return lanes[0];
  });

  // The cards a lane holds blocked, oldest first, with why: what an operator acts on (needs-human waits for an unblock).
  app.get<{ Params: { name: string }; Querystring: { limit?: string } }>('/v1/lanes/:name/blocked', async (request) => {
    const lane = deps.lanes.find((l) => l.name === request.params.name && inScope(request.principal, l.name));
    if (!lane) throw notFound(`lane ${request.params.name}`);
    const limit = blockedLimitOf(request.query.limit);
    const blocked = (await deps.store.blocked(lane.name)).sort((a, b) => a.since - b.since);
    const shown = blocked.slice(0, limit);
    const records = await Promise.all(shown.map((b) => deps.store.get(b.id)));
    const cards = shown.map((b, i) => {
      const r = records[i];
      return {
        id: b.id,
        blockedReason: b.blockedReason,
        since: new Date(b.since).toISOString(),
        ...(r?.title ? { title: r.title } : {}),
        ...(r?.blockedMessage ? { message: r.blockedMessage } : {}),
      };
    });
    return { lane: lane.name, total: blocked.length, cards };
  });

  // KEDA's metrics-api scaler reads `desiredWorkers` (valueLocation) from this body.
  app.get<{ Params: { name: string } }>('/v1/lanes/:name/scale', async (request) => {
    const lane = deps.lanes.find((l) => l.name === request.params.name && inScope(request.principal, l.name));
    if (!lane) throw notFound(`lane ${request.params.name}`);
    const decision = await laneScale(deps, lane, Date.now());
    return { lane: lane.name, desiredWorkers: decision.desiredWorkers, desiredSlots: decision.desiredSlots, depth: decision.depth, reason: decision.reason };
  });
}
