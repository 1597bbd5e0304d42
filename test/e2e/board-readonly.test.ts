import { Queue } from 'bullmq';
import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { QUEUE_PREFIX } from '@lanes/queue';
import { useRedis } from '../harness/index.js';

const BOARD_API = '/admin/queues/api/queues';
const agent = [process.execPath, DEMO_AGENT];

describe('Bull Board read-only mode (LANES_BOARD_READONLY=1)', () => {
  const f = useRedis();

  /** A lane with a finished card on it, and the lane's queue as BullMQ sees it. */
  async function withDoneCard(lane: string, boardReadOnly: boolean) {
    const t = await f.stack([{ name: lane, slots: 1, agent }], { boardReadOnly });
    await t.api.request('POST', '/v1/cards', { id: `${lane}-1`, lane, title: 'board test' });
    await t.api.waitCard(`${lane}-1`, 'done', (c) => c.state === 'done');
    return { api: t.api, queue: new Queue(lane, { connection: f.conn, prefix: QUEUE_PREFIX }) };
  }

  it('shows the queues but refuses to pause one or clean a job', async () => {
    const { api, queue } = await withDoneCard('ro', true);
    try {
      const listed = await api.request<{ queues: Array<{ name: string; readOnlyMode: boolean }> }>('GET', BOARD_API);
      expect(listed.status).toBe(200);
      expect(listed.body.queues).toEqual([expect.objectContaining({ name: 'ro', readOnlyMode: true })]);

      const pause = await api.request('PUT', `${BOARD_API}/ro/pause`);
      expect(pause.status).toBe(405);
      expect(await queue.isPaused()).toBe(false);

      const clean = await api.request('PUT', `${BOARD_API}/ro/ro-1/clean`);
      expect(clean.status).toBe(405);
      expect(await queue.getJob('ro-1')).toBeDefined();
    } finally {
      await queue.close();
    }
  });

  it('without it, the same calls change the queue (so the refusal above is the mode, not the route)', async () => {
    const { api, queue } = await withDoneCard('rw', false);
    try {
      expect((await api.request('PUT', `${BOARD_API}/rw/pause`)).status).toBe(200);
      expect(await queue.isPaused()).toBe(true);
      expect((await api.request('PUT', `${BOARD_API}/rw/resume`)).status).toBe(200);
      expect((await api.request('PUT', `${BOARD_API}/rw/rw-1/clean`)).status).toBe(204);
      expect(await queue.getJob('rw-1')).toBeUndefined();
    } finally {
      await queue.close();
    }
  });
});
