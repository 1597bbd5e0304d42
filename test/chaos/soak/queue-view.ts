import { Redis } from 'ioredis';

/** Where BullMQ says a card's job ended: its completed or failed set, or neither (still live, or removed). */
export type QueueEnd = 'completed' | 'failed' | 'none';

/**
 * Reads the lane's BullMQ completed and failed sets straight from the soak's own Redis, so the
 * board's view can be checked against the queue's. Key names are BullMQ's (`lanes:<lane>:completed`).
 */
export async function readQueueEnds(redisUrl: string, lane: string, ids: readonly string[]): Promise<Map<string, QueueEnd>> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 3, lazyConnect: true });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const pipeline = redis.pipeline();
    for (const id of ids) {
      pipeline.zscore(`lanes:${lane}:completed`, id);
      pipeline.zscore(`lanes:${lane}:failed`, id);
    }
    const replies = (await pipeline.exec()) ?? [];
    const out = new Map<string, QueueEnd>();
    ids.forEach((id, i) => {
      const completed = replies[2 * i]?.[1];
      const failed = replies[2 * i + 1]?.[1];
      out.set(id, completed != null ? 'completed' : failed != null ? 'failed' : 'none');
    });
    return out;
  } finally {
    redis.disconnect();
  }
}

/**
 * Board and queue disagree when the board says done but the job did not complete, says failed but
 * the job did not fail, or is not terminal although the job ended. A cancelled card may end its job
 * either way, so it is left out.
 */
export function disagrees(boardState: string | undefined, queue: QueueEnd | undefined): boolean {
  if (boardState === 'cancelled' || queue === undefined) return false;
  if (boardState === 'done') return queue !== 'completed';
  if (boardState === 'failed') return queue !== 'failed';
  return queue !== 'none';
}
