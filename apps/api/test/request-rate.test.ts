import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaults, parseLanesConfig } from '@lanes/contracts';
import { useRedis } from '../../../test/harness/index.js';
import { createApiServer, type ApiServer, type Principal } from '../src/index.js';
import { RequestRateLimiter, requestRate } from '../src/edge/request-rate.js';

describe('RequestRateLimiter: a bucket of requests per token, in this process', () => {
  const board = (name: string, requestsPerSecond?: number): Principal => ({ name, role: 'read', lanes: '*', ...(requestsPerSecond !== undefined ? { requestsPerSecond } : {}) });

  it('holds TOKEN_REQUEST_BURST_S seconds of the rate, refuses past it saying when, refills, and keeps one bucket per token', () => {
    let now = 0;
    const limiter = new RequestRateLimiter(() => now);
    const burst = 2 * defaults.TOKEN_REQUEST_BURST_S;
    for (let i = 0; i < burst; i++) expect(limiter.take(board('poller', 2))).toEqual({ ok: true });
    expect(limiter.take(board('poller', 2))).toEqual({ ok: false, retryAfterMs: 500, perSecond: 2 });
    // Another token's bucket is whole; a principal without a rate (admin, open) is never refused.
    expect(limiter.take(board('neighbour', 2))).toEqual({ ok: true });
    for (let i = 0; i < 3 * burst; i++) expect(limiter.take(board('admin'))).toEqual({ ok: true });
    now += 500;
    expect(limiter.take(board('poller', 2))).toEqual({ ok: true });
    expect(limiter.take(board('poller', 2)).ok).toBe(false);
    expect(limiter.refused).toBe(2);
  });

  it('a rate under one a second still lets one request through', () => {
    expect(requestRate(0.01)).toEqual({ perSecond: 0.01, burst: 1 });
    expect(requestRate(100)).toEqual({ perSecond: 100, burst: 100 * defaults.TOKEN_REQUEST_BURST_S });
  });
});

describe('a token past its requestsPerSecond is refused before the handler (real API and Redis)', () => {
  const f = useRedis();
  let api: ApiServer;
  let now = 1_000_000;
  const POLLER = 'poller-board-token-value-77a1';
  const NEIGHBOUR = 'neighbour-board-token-value-0e3c';
  const ADMIN = 'operator-admin-token-value-5d2f';
  const lanes = parseLanesConfig({ lanes: [{ name: 'polled', agent: ['true'] }] }).lanes;
  const ask = (token: string, url = '/v1/lanes') => api.app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${token}` } });

  beforeAll(async () => {
    api = await createApiServer({
      redis: f.conn,
      lanes,
      log: pino({ level: 'silent' }),
      now: () => now,
      tokens: [ADMIN],
      scopedTokens: [
        { name: 'poller', fromEnv: 'POLLER_TOKEN', lanes: ['polled'], role: 'write', requestsPerSecond: 1 },
        { name: 'neighbour', fromEnv: 'NEIGHBOUR_TOKEN', lanes: ['polled'], role: 'read' },
      ],
      tokenEnv: { POLLER_TOKEN: POLLER, NEIGHBOUR_TOKEN: NEIGHBOUR },
    });
  });
  afterAll(async () => {
    await api?.close();
  });

  it('answers its burst, then 429 RATE_LIMITED with Retry-After on reads and posts alike, nothing queued; other tokens go on', async () => {
    for (let i = 0; i < defaults.TOKEN_REQUEST_BURST_S; i++) expect((await ask(POLLER)).statusCode).toBe(200);
    const refused = await ask(POLLER);
    expect([refused.statusCode, refused.json().error.code, refused.headers['retry-after']]).toEqual([429, 'RATE_LIMITED', '1']);
    expect(refused.json().error.message).toMatch(/"poller" may make 1 requests per second/);
    const post = await api.app.inject({
      method: 'POST',
      url: '/v1/cards',
      headers: { authorization: `Bearer ${POLLER}`, 'content-type': 'application/json' },
      payload: JSON.stringify({ id: 'past-the-rate', lane: 'polled', title: 't' }),
    });
    expect([post.statusCode, post.json().error.code]).toEqual([429, 'RATE_LIMITED']);
    expect((await ask(ADMIN, '/v1/cards/past-the-rate')).statusCode).toBe(404);
    // The default rate (DEFAULT_TOKEN_REQUESTS_PER_S) of another board, and the operator's admin token, are untouched.
    expect((await ask(NEIGHBOUR)).statusCode).toBe(200);
    for (let i = 0; i < 2 * defaults.TOKEN_REQUEST_BURST_S; i++) expect((await ask(ADMIN)).statusCode).toBe(200);
    // Health probes carry no token and are never limited.
    expect((await api.app.inject({ method: 'GET', url: '/healthz' })).statusCode).toBe(200);
    now += 1_000;
    expect((await ask(POLLER)).statusCode).toBe(200);
    const metrics = await ask(ADMIN, '/metrics');
    expect(metrics.body).toMatch(/^lanes_requests_rate_limited_total 2$/m);
  });
});
