import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';

export const BOARD_PATH = '/admin/queues';

/** Bull Board over every lane queue, behind the same auth hook as the API. */
export async function registerBoard(app: FastifyInstance, queues: Queue[]): Promise<void> {
  const adapter = new FastifyAdapter();
  adapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q)),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'lanes' } },
  });
  await app.register(adapter.registerPlugin(), { prefix: BOARD_PATH });
}
