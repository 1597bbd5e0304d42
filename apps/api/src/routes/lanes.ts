import type { FastifyInstance } from 'fastify';
import type { Redis } from 'ioredis';
import { notFound } from '../api-error.js';
import { laneScale } from '../lane-scale.js';
import { laneStatuses, type LaneStatusDeps } from '../lane-status.js';

export function laneRoutes(app: FastifyInstance, deps: LaneStatusDeps & { redis: Redis }): void {
  app.get('/v1/lanes', async () => ({ lanes: await laneStatuses(deps) }));

  app.get<{ Params: { id: string } }>('/v1/sandboxes/:id', async (request) => {
    const record = await deps.fleet.sandbox(request.params.id);
    if (!record) throw notFound(`sandbox ${request.params.id}`);
    return record;
  });

  app.get<{ Params: { name: string } }>('/v1/lanes/:name', async (request) => {
    const lanes = await laneStatuses({ ...deps, lanes: deps.lanes.filter((l) => l.name === request.params.name) });
    if (!lanes[0]) throw notFound(`lane ${request.params.name}`);
    return lanes[0];
  });

  // KEDA's metrics-api scaler reads `desiredWorkers` (valueLocation) from this body.
  app.get<{ Params: { name: string } }>('/v1/lanes/:name/scale', async (request) => {
    const lane = deps.lanes.find((l) => l.name === request.params.name);
    if (!lane) throw notFound(`lane ${request.params.name}`);
    const decision = await laneScale(deps, lane, Date.now());
    return { lane: lane.name, desiredWorkers: decision.desiredWorkers, desiredSlots: decision.desiredSlots, depth: decision.depth, reason: decision.reason };
  });
}
