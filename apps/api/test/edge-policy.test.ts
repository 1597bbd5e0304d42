import { describe, expect, it } from 'vitest';
import { ConfigError } from '@lanes/contracts';
import { compileApiTokens, evaluateAccess, evaluateBind, evaluateEdge, identify, inScope, isLoopbackHost, type EdgeRequest, type Principal } from '../src/index.js';

const p = (role: Principal['role'], lanes: '*' | string[]): Principal => ({
  name: `${role}-${lanes === '*' ? 'all' : lanes.join('+')}`,
  role,
  lanes: lanes === '*' ? '*' : new Set(lanes),
});

describe('evaluateAccess', () => {
  it.each([
    // mutations under /v1 need write
    { who: p('read', '*'), method: 'POST', path: '/v1/cards', want: 'forbid' },
    { who: p('read', ['a']), method: 'POST', path: '/v1/cards/x/cancel', want: 'forbid' },
    { who: p('write', ['a']), method: 'POST', path: '/v1/cards', want: 'allow' },
    { who: p('admin', ['a']), method: 'POST', path: '/v1/cards/x/unblock', want: 'allow' },
    { who: p('read', '*'), method: 'DELETE', path: '/v1/cards/x', want: 'forbid' },
    { who: p('read', ['a']), method: 'GET', path: '/v1/cards/x', want: 'allow' },
    { who: p('read', ['a']), method: 'HEAD', path: '/v1/lanes', want: 'allow' },
    // /metrics covers every lane
    { who: p('read', '*'), method: 'GET', path: '/metrics', want: 'allow' },
    { who: p('admin', ['a']), method: 'GET', path: '/metrics', want: 'forbid' },
    { who: p('write', ['a', 'b']), method: 'GET', path: '/metrics', want: 'forbid' },
    // Bull Board: "*" to look, admin to change
    { who: p('read', '*'), method: 'GET', path: '/admin/queues', want: 'allow' },
    { who: p('read', '*'), method: 'GET', path: '/admin/queues/api/queues', want: 'allow' },
    { who: p('read', '*'), method: 'PUT', path: '/admin/queues/api/queues/a/pause', want: 'forbid' },
    { who: p('write', '*'), method: 'PUT', path: '/admin/queues/api/queues/a/a-1/retry', want: 'forbid' },
    { who: p('write', '*'), method: 'DELETE', path: '/admin/queues/api/queues/a/obliterate', want: 'forbid' },
    { who: p('admin', '*'), method: 'PUT', path: '/admin/queues/api/queues/a/pause', want: 'allow' },
    { who: p('admin', ['a']), method: 'GET', path: '/admin/queues', want: 'forbid' },
    // the status page's own files: any token
    { who: p('read', ['a']), method: 'GET', path: '/', want: 'allow' },
    { who: p('read', ['a']), method: 'GET', path: '/status-page/status.js', want: 'allow' },
  ])('$who.name $method $path → $want', ({ who, method, path, want }) => {
    const d = evaluateAccess(who, { method, path });
    expect(d.action).toBe(want);
    if (d.action === 'forbid') expect(d.reason).toContain(who.name);
  });
});

describe('inScope', () => {
  it.each([
    { who: p('read', '*'), lane: 'anything', want: true },
    { who: p('write', ['a', 'b']), lane: 'b', want: true },
    { who: p('write', ['a', 'b']), lane: 'c', want: false },
    { who: p('admin', ['a']), lane: 'A', want: false },
  ])('$who.name sees $lane: $want', ({ who, lane, want }) => {
    expect(inScope(who, lane)).toBe(want);
  });
});

const req = (method: string, path: string, headers: EdgeRequest['headers']): EdgeRequest => ({ method, path, headers: { host: '127.0.0.1:3000', ...headers } });
const JSON_CT = { 'content-type': 'application/json' };

describe('evaluateEdge', () => {
  it.each([
    // open mode: loopback Host names only
    { name: 'open, localhost:port', open: true, r: req('GET', '/v1/lanes', { host: 'localhost:3000' }), want: 'pass' },
    { name: 'open, localhost', open: true, r: req('GET', '/v1/lanes', { host: 'localhost' }), want: 'pass' },
    { name: 'open, LOCALHOST', open: true, r: req('GET', '/v1/lanes', { host: 'LOCALHOST:3000' }), want: 'pass' },
    { name: 'open, 127.0.0.1', open: true, r: req('GET', '/v1/lanes', { host: '127.0.0.1:9' }), want: 'pass' },
    { name: 'open, [::1]:port', open: true, r: req('GET', '/v1/lanes', { host: '[::1]:3000' }), want: 'pass' },
    { name: 'open, a rebinding name', open: true, r: req('GET', '/v1/lanes', { host: 'attacker.example:3000' }), want: 'HOST_NOT_LOOPBACK' },
    { name: 'open, localhost as a subdomain', open: true, r: req('GET', '/v1/lanes', { host: 'localhost.attacker.example' }), want: 'HOST_NOT_LOOPBACK' },
    { name: 'open, another loopback address', open: true, r: req('GET', '/v1/lanes', { host: '127.0.0.2:3000' }), want: 'HOST_NOT_LOOPBACK' },
    { name: 'open, no Host', open: true, r: req('GET', '/v1/lanes', { host: undefined }), want: 'HOST_NOT_LOOPBACK' },
    { name: 'open, health too', open: true, r: req('GET', '/healthz', { host: '10.0.0.1:3000' }), want: 'HOST_NOT_LOOPBACK' },
    { name: 'tokens, any Host', open: false, r: req('GET', '/v1/lanes', { host: 'lanes.internal' }), want: 'pass' },
    // cross-site
    { name: 'Sec-Fetch-Site cross-site POST', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, 'sec-fetch-site': 'cross-site' }), want: 'CROSS_SITE' },
    { name: 'Sec-Fetch-Site cross-site fetch GET', open: false, r: req('GET', '/v1/cards/x', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'cors' }), want: 'CROSS_SITE' },
    { name: 'a cross-site link to the status page', open: false, r: req('GET', '/', { 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }), want: 'pass' },
    {
      name: 'a cross-site form POST navigation',
      open: false,
      r: req('POST', '/v1/cards/x/cancel', { ...JSON_CT, 'sec-fetch-site': 'cross-site', 'sec-fetch-mode': 'navigate' }),
      want: 'CROSS_SITE',
    },
    { name: 'same-origin', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, 'sec-fetch-site': 'same-origin', origin: 'http://127.0.0.1:3000' }), want: 'pass' },
    { name: 'Origin of another host', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, origin: 'http://evil.example' }), want: 'CROSS_SITE' },
    { name: 'Origin of another port', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, origin: 'http://127.0.0.1:4000' }), want: 'CROSS_SITE' },
    { name: 'Origin null', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, origin: 'null' }), want: 'CROSS_SITE' },
    { name: 'Origin on a GET', open: false, r: req('GET', '/v1/lanes', { origin: 'http://evil.example' }), want: 'CROSS_SITE' },
    { name: 'Origin on Bull Board', open: false, r: req('PUT', '/admin/queues/api/queues/a/pause', { origin: 'http://evil.example' }), want: 'CROSS_SITE' },
    { name: 'Origin with the default port', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, host: 'lanes.example:80', origin: 'http://lanes.example' }), want: 'pass' },
    { name: 'Origin over https', open: false, r: req('POST', '/v1/cards', { ...JSON_CT, host: 'Lanes.Example', origin: 'https://lanes.example' }), want: 'pass' },
    // JSON mutations
    { name: 'text/plain POST', open: false, r: req('POST', '/v1/cards/x/cancel', { 'content-type': 'text/plain' }), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'urlencoded POST', open: false, r: req('POST', '/v1/cards', { 'content-type': 'application/x-www-form-urlencoded' }), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'multipart POST', open: false, r: req('POST', '/v1/cards', { 'content-type': 'multipart/form-data; boundary=x' }), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'POST with no type', open: false, r: req('POST', '/v1/cards/x/cancel', {}), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'application/jsonp', open: false, r: req('POST', '/v1/cards', { 'content-type': 'application/jsonp' }), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'DELETE with no type', open: false, r: req('DELETE', '/v1/cards/x', {}), want: 'UNSUPPORTED_MEDIA_TYPE' },
    { name: 'JSON with a charset', open: false, r: req('POST', '/v1/cards', { 'content-type': 'Application/JSON; charset=utf-8' }), want: 'pass' },
    { name: 'GET with no type', open: false, r: req('GET', '/v1/cards/x', {}), want: 'pass' },
    { name: 'Bull Board PUT with no type (its own API)', open: false, r: req('PUT', '/admin/queues/api/queues/a/pause', {}), want: 'pass' },
  ])('$name → $want', ({ open, r, want }) => {
    const d = evaluateEdge(r, { open });
    expect(d.action === 'pass' ? 'pass' : d.code).toBe(want);
    if (d.action === 'refuse') expect(d.status).toBe({ HOST_NOT_LOOPBACK: 421, CROSS_SITE: 403, UNSUPPORTED_MEDIA_TYPE: 415 }[d.code]);
  });

  it.each([
    ['localhost', true],
    ['[::1]', true],
    ['[::1]:80', true],
    ['::1', false],
    ['0.0.0.0:3000', false],
    ['', false],
    [undefined, false],
  ] as const)('isLoopbackHost(%j) is %s', (host, want) => {
    expect(isLoopbackHost(host)).toBe(want);
  });
});

describe('evaluateBind', () => {
  it.each([
    { host: '127.0.0.1', open: true, want: 'bind' },
    { host: '127.1.2.3', open: true, want: 'bind' },
    { host: 'localhost', open: true, want: 'bind' },
    { host: '::1', open: true, want: 'bind' },
    { host: '[::1]', open: true, want: 'bind' },
    { host: '0.0.0.0', open: true, want: 'refuse' },
    { host: '::', open: true, want: 'refuse' },
    { host: '10.1.2.3', open: true, want: 'refuse' },
    { host: 'lanes.internal', open: true, want: 'refuse' },
    { host: '0.0.0.0', open: false, want: 'bind' },
  ])('$host, open $open → $want', ({ host, open, want }) => {
    const d = evaluateBind(host, { open });
    expect(d.action).toBe(want);
    if (d.action === 'refuse') expect(d.reason).toContain('LANES_API_TOKENS');
  });
});

describe('compileApiTokens and identify', () => {
  const sha = 'a'.repeat(64);
  it('names LANES_API_TOKENS entries by position as admin over every lane, config tokens by name and scope', () => {
    const tokens = compileApiTokens(['first', 'second'], [{ name: 'board-a', fromEnv: 'A_TOKEN', lanes: ['a'], role: 'write' }], { A_TOKEN: 'aaa' });
    expect(tokens.map(({ name, role, lanes }) => ({ name, role, lanes }))).toEqual([
      { name: 'LANES_API_TOKENS#1', role: 'admin', lanes: '*' },
      { name: 'LANES_API_TOKENS#2', role: 'admin', lanes: '*' },
      { name: 'board-a', role: 'write', lanes: new Set(['a']) },
    ]);
    expect(identify(tokens, 'second')?.name).toBe('LANES_API_TOKENS#2');
    expect(identify(tokens, 'aaa')?.name).toBe('board-a');
    expect(identify(tokens, 'aa')).toBeUndefined();
    expect(identify(tokens, 'aaaa')).toBeUndefined();
    expect(identify(tokens, '')).toBeUndefined();
  });

  it('matches a sha256 token by the hash of its value', () => {
    const digest = '2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b'; // sha256("secret")
    const tokens = compileApiTokens([], [{ name: 'keda', sha256: digest, lanes: '*', role: 'read' }], {});
    expect(identify(tokens, 'secret')?.name).toBe('keda');
    expect(identify(tokens, digest)).toBeUndefined();
  });

  it.each([
    { name: 'an unset fromEnv', env: {}, path: 'tokens.0.fromEnv' },
    { name: 'an empty fromEnv', env: { A_TOKEN: '' }, path: 'tokens.0.fromEnv' },
    { name: 'a value shared with LANES_API_TOKENS', env: { A_TOKEN: 'first' }, path: 'tokens.0' },
  ])('refuses $name, naming $path and never the value', ({ env, path }) => {
    try {
      compileApiTokens(['first'], [{ name: 'board-a', fromEnv: 'A_TOKEN', lanes: ['a'], role: 'write' }], env);
      expect.unreachable('should refuse');
    } catch (err) {
      expect(err).toBeInstanceOf(ConfigError);
      expect((err as ConfigError).issues.map((i) => i.path)).toEqual([path]);
      expect((err as ConfigError).message).not.toContain('first');
    }
    expect(() => compileApiTokens([], [{ name: 'k', sha256: sha, lanes: '*', role: 'read' }], {})).not.toThrow();
  });
});
