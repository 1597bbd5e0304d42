import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { compileApiTokens, createAuthHook, parseTokens } from '../src/index.js';

const TOKENS = ['tok-alpha', 'tok-beta'];
const basic = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

describe('createAuthHook', () => {
  let app: FastifyInstance | undefined;
  const errors: unknown[] = [];

  afterEach(async () => {
    await app?.close();
    app = undefined;
    errors.length = 0;
  });

  /** A bare Fastify with only the hook and a few routes; errors are captured and answered as the API does. */
  async function server(tokens: readonly string[]): Promise<FastifyInstance> {
    app = Fastify();
    app.setErrorHandler((err, _request, reply) => {
      errors.push(err);
      const e = err as { statusCode?: number; code?: string; message: string };
      return reply.code(e.statusCode ?? 500).send({ error: { code: e.code, message: e.message } });
    });
    app.addHook('onRequest', createAuthHook(compileApiTokens(tokens, [], {})));
    for (const path of ['/', '/status-page/status.js', '/v1/lanes', '/healthz', '/readyz', '/metrics', '/admin/queues', '/admin/queues/api/queues']) {
      app.get(path, async () => ({ ok: path }));
    }
    await app.ready();
    return app;
  }

  const get = (a: FastifyInstance, url: string, authorization?: string) => a.inject({ method: 'GET', url, headers: authorization === undefined ? {} : { authorization } });

  it('is open when no tokens are configured', async () => {
    const a = await server([]);
    for (const url of ['/', '/v1/lanes', '/admin/queues', '/metrics']) {
      const res = await get(a, url);
      expect(res.statusCode).toBe(200);
      expect(res.json()).toEqual({ ok: url });
    }
    expect((await get(a, '/v1/lanes', 'Bearer anything')).statusCode).toBe(200);
  });

  it.each([
    { name: 'the first token', auth: 'Bearer tok-alpha' },
    { name: 'the second token', auth: 'Bearer tok-beta' },
    { name: 'a lower-case scheme', auth: 'bearer tok-beta' },
    { name: 'Basic with the token as password', auth: basic('admin', 'tok-alpha') },
    { name: 'Basic with an empty user', auth: basic('', 'tok-beta') },
  ])('accepts $name', async ({ auth }) => {
    const a = await server(TOKENS);
    const res = await get(a, '/v1/lanes', auth);
    expect(res.statusCode).toBe(200);
    expect(errors).toEqual([]);
  });

  it.each([
    { name: 'no header', auth: undefined },
    { name: 'a wrong token', auth: 'Bearer tok-gamma' },
    { name: 'a token prefix', auth: 'Bearer tok-alph' },
    { name: 'a token with extra characters', auth: 'Bearer tok-alphaX' },
    { name: 'an empty bearer', auth: 'Bearer ' },
    { name: 'a bare scheme', auth: 'Bearer' },
    { name: 'an empty header', auth: '' },
    { name: 'the token without a scheme', auth: 'tok-alpha' },
    { name: 'an unknown scheme', auth: 'Token tok-alpha' },
    { name: 'Basic with the token as user', auth: basic('tok-alpha', 'x') },
    { name: 'Basic with a wrong password', auth: basic('admin', 'nope') },
    { name: 'Basic with an empty password', auth: basic('admin', '') },
  ])('refuses $name with 401 UNAUTHORIZED, answered by the hook itself', async ({ auth }) => {
    const a = await server(TOKENS);
    const res = await get(a, '/v1/lanes', auth);
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ error: { code: 'UNAUTHORIZED', message: 'missing or invalid API token' } });
    // Answered in the API's shape without the error handler, so a plugin's own handler (Bull Board's) cannot reshape it.
    expect(errors).toEqual([]);
    expect(res.headers['www-authenticate']).toBeUndefined();
  });

  it.each(['/healthz', '/readyz', '/healthz?verbose=1'])('leaves %s open without credentials', async (url) => {
    const a = await server(TOKENS);
    expect((await get(a, url)).statusCode).toBe(200);
    expect((await get(a, url, 'Bearer wrong')).statusCode).toBe(200);
  });

  it('does not leave /metrics open', async () => {
    const a = await server(TOKENS);
    expect((await get(a, '/metrics')).statusCode).toBe(401);
  });

  it.each(['/', '/?x=1', '/status-page/status.js', '/admin/queues', '/admin/queues/api/queues', '/admin/queues?x=1'])('asks a browser for Basic on %s only', async (url) => {
    const a = await server(TOKENS);
    const res = await get(a, url);
    expect(res.statusCode).toBe(401);
    expect(res.headers['www-authenticate']).toMatch(/^Basic\b/);
    expect((await get(a, url, basic('admin', 'tok-beta'))).statusCode).toBe(200);
  });
});

describe('parseTokens', () => {
  it.each([
    { raw: undefined, want: [] },
    { raw: '', want: [] },
    { raw: ' , ,', want: [] },
    { raw: 'a', want: ['a'] },
    { raw: 'a,b', want: ['a', 'b'] },
    { raw: ' a , b ,, c ', want: ['a', 'b', 'c'] },
  ])('$raw → $want', ({ raw, want }) => {
    expect(parseTokens(raw)).toEqual(want);
  });
});
