import { describe, expect, it } from 'vitest';
import { DEMO_AGENT } from '@lanes/cli';
import { useRedis, waitFor } from '../harness/index.js';

describe('a burst on a lane below its maximum (issue 29)', () => {
  const f = useRedis();

  it('grows to every slot it may host when cards take its last free slot, without waiting for the next heartbeat', async () => {
    // A heartbeat far longer than the test: only the burst itself can start the growth.
    const t = await f.stack([{ name: 'burst', slots: 4, minSlots: 0, maxSlots: 4, agent: [process.execPath, DEMO_AGENT] }], {
      heartbeatIntervalMs: 120_000,
    });
    const cards = Array.from({ length: 12 }, (_, i) => ({ id: `burst-${i}`, lane: 'burst', title: 'burst', metadata: { sleepMs: 5_000 } }));
    const res = await t.api.request('POST', '/v1/cards', { cards });
    expect(res.status).toBe(202);
    const busy = await waitFor(
      'four slots running cards',
      async () => {
        const n = (await t.api.lanes())[0]!.slots.filter((s) => s.cardId !== undefined && s.sandbox?.state === 'live').length;
        return n >= 4 ? n : undefined;
      },
      { timeoutMs: 4_000 },
    );
    expect(busy).toBe(4);
  });
});
