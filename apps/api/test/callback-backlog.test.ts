import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaults, parseLanesConfig } from '@lanes/contracts';
import { ackCallbacks, keys } from '@lanes/queue';
import { useRedis } from '../../../test/harness/index.js';
import { createApiServer, type ApiServer } from '../src/index.js';

/** Past the callback backlog bound a card with a callbackUrl is refused with 503 CALLBACK_BACKLOG, and /metrics says so (real Redis). */
describe('the callback backlog at the API', () => {
  const f = useRedis();
  let api: ApiServer;
  const lanes = parseLanesConfig({ lanes: [{ name: 'bk', agent: ['true'] }] }).lanes;

  beforeAll(async () => {
    api = await createApiServer({ redis: f.conn, lanes, log: pino({ level: 'silent' }), callbackAllow: [] });
  });
  afterAll(async () => {
    await api?.close();
  });

  const post = (body: unknown) => api.app.inject({ method: 'POST', url: '/v1/cards', payload: body as object });
  const metric = async (name: string) => {
    const text = (await api.app.inject({ method: 'GET', url: '/metrics' })).body;
    return Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);
  };
  /** Callback entries waiting, as a stalled supervisor leaves them. */
  const fill = async (count: number) => {
    const pipeline = f.conn.pipeline();
    for (let i = 0; i < count; i++) pipeline.xadd(keys.callbacks(), '*', 'e', '{}');
    await pipeline.exec();
  };

  it(`takes cards under the bound; at ${defaults.DEFAULT_CALLBACK_BACKLOG_MAX} waiting callbacks refuses those with a callbackUrl, whole batches too`, async () => {
    await fill(defaults.DEFAULT_CALLBACK_BACKLOG_MAX - 1);
    expect((await post({ id: 'bk-under', lane: 'bk', title: 'x', callbackUrl: 'https://board.example/hook' })).statusCode).toBe(202);
    expect(await metric('lanes_callback_backlog')).toBe(defaults.DEFAULT_CALLBACK_BACKLOG_MAX - 1);
    expect(await metric('lanes_callback_backlog_limit')).toBe(defaults.DEFAULT_CALLBACK_BACKLOG_MAX);

    await fill(1);
    const refused = await post({ id: 'bk-over', lane: 'bk', title: 'x', callbackUrl: 'https://board.example/hook' });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({ error: { code: 'CALLBACK_BACKLOG', message: expect.stringContaining(String(defaults.DEFAULT_CALLBACK_BACKLOG_MAX)) } });
    const bulk = await post({
      cards: [
        { id: 'bk-quiet-in-batch', lane: 'bk', title: 'x' },
        { id: 'bk-over-2', lane: 'bk', title: 'x', callbackUrl: 'https://board.example/hook' },
      ],
    });
    expect(bulk.statusCode).toBe(503);
    for (const id of ['bk-over', 'bk-over-2', 'bk-quiet-in-batch']) expect((await api.app.inject({ method: 'GET', url: `/v1/cards/${id}` })).statusCode).toBe(404);
    // A card that owes no callback is still taken.
    expect((await post({ id: 'bk-quiet', lane: 'bk', title: 'x' })).statusCode).toBe(202);
    expect(await metric('lanes_callback_backlog')).toBe(defaults.DEFAULT_CALLBACK_BACKLOG_MAX);
  });
});

/** One board whose endpoint never takes its callbacks fills its own lane's share, not the stream every board shares (real Redis). */
describe("a lane's own callback backlog at the API", () => {
  const f = useRedis();
  let api: ApiServer;
  const LANE_MAX = 3;
  const lanes = parseLanesConfig({
    lanes: [
      { name: 'stuck', agent: ['true'] },
      { name: 'fine', agent: ['true'] },
    ],
  }).lanes;

  beforeAll(async () => {
    api = await createApiServer({ redis: f.conn, lanes, log: pino({ level: 'silent' }), callbackAllow: [], laneCallbackBacklogMax: LANE_MAX });
  });
  afterAll(async () => {
    await api?.close();
  });

  const post = (body: unknown) => api.app.inject({ method: 'POST', url: '/v1/cards', payload: body as object });
  const hook = 'https://board.example/hook';
  const metrics = async () => (await api.app.inject({ method: 'GET', url: '/metrics' })).body;

  it('refuses only that lane its cards with a callbackUrl, naming it; once its entries are acknowledged it takes them again', async () => {
    await f.conn.xgroup('CREATE', keys.callbacks(), 'lanes-callbacks', '0', 'MKSTREAM');
    // Three cancels of cards with a callback: each owes the stuck lane's board a callback nobody takes.
    for (let i = 0; i < LANE_MAX; i++) {
      expect((await post({ id: `stuck-${i}`, lane: 'stuck', title: 'x', callbackUrl: hook })).statusCode).toBe(202);
      expect((await api.app.inject({ method: 'POST', url: `/v1/cards/stuck-${i}/cancel`, headers: { 'content-type': 'application/json' } })).json()).toMatchObject({
        state: 'cancelled',
      });
    }
    expect(await metrics()).toContain(`lanes_callback_owed{lane="stuck"} ${LANE_MAX}`);
    expect(await metrics()).toContain(`lanes_callback_owed_limit ${LANE_MAX}`);
    const refused = await post({ id: 'stuck-more', lane: 'stuck', title: 'x', callbackUrl: hook });
    expect(refused.statusCode).toBe(503);
    expect(refused.json()).toMatchObject({
      error: { code: 'CALLBACK_BACKLOG', message: expect.stringContaining(`callbacks of lane "stuck" wait for delivery (bound ${LANE_MAX} a lane)`) },
    });
    // Another board's lane, and the stuck lane's cards without a callback, are taken.
    expect((await post({ id: 'fine-1', lane: 'fine', title: 'x', callbackUrl: hook })).statusCode).toBe(202);
    expect((await post({ id: 'stuck-quiet', lane: 'stuck', title: 'x' })).statusCode).toBe(202);
    // The dispatcher reads and acknowledges them (delivered or given up): the lane's share is back.
    const read = (await f.conn.xreadgroup('GROUP', 'lanes-callbacks', 'one', 'COUNT', 100, 'STREAMS', keys.callbacks(), '>')) as Array<[string, Array<[string, string[]]>]>;
    await ackCallbacks(
      f.conn,
      'lanes-callbacks',
      read[0]![1].map(([id]) => id),
    );
    expect(await metrics()).toContain('lanes_callback_owed{lane="stuck"} 0');
    expect((await post({ id: 'stuck-more', lane: 'stuck', title: 'x', callbackUrl: hook })).statusCode).toBe(202);
  });
});
