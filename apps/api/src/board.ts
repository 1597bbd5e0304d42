import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { Queue } from 'bullmq';

export const BOARD_PATH = '/admin/queues';

/**
 * Bull Board over every lane queue, behind the same auth hook as the API. `readOnly`
 * (LANES_BOARD_READONLY=1) puts every queue in the board's read-only mode: it still shows cards,
 * but refuses retries, cleans, pauses and deletes (405), so the board cannot work around lanes'
 * own card states.
 */
export async function registerBoard(app: FastifyInstance, queues: Queue[], { readOnly = false }: { readOnly?: boolean } = {}): Promise<void> {
  const adapter = new FastifyAdapter();
  adapter.setBasePath(BOARD_PATH);
  createBullBoard({
    queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode: readOnly })),
    serverAdapter: adapter,
    options: { uiConfig: { boardTitle: 'lanes' } },
  });
  await app.register(adapter.registerPlugin(), { prefix: BOARD_PATH });
}
