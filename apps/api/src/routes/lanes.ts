import type { FastifyInstance } from 'fastify';
import { notFound } from '../api-error.js';
import { laneStatuses, type LaneStatusDeps } from '../lane-status.js';

export function laneRoutes(app: FastifyInstance, deps: LaneStatusDeps): void {
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
}
