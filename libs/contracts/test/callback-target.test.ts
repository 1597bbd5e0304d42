import { describe, expect, it } from 'vitest';
import { ConfigError, classifyAddress, evaluateCallbackTarget, parseAllowRule, parseEnv, type CallbackAllowRule } from '@lanes/contracts';

describe('classifyAddress', () => {
  it.each([
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.5', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['172.32.0.1', 'public'],
    ['172.15.255.255', 'public'],
    ['192.168.1.1', 'private'],
    ['100.64.0.1', 'private'],
    ['169.254.169.254', 'metadata'],
    ['169.254.169.253', 'link-local'],
    ['169.254.0.1', 'link-local'],
    ['0.0.0.0', 'unspecified'],
    ['8.8.8.8', 'public'],
    ['1.1.1.1', 'public'],
    ['::1', 'loopback'],
    ['[::1]', 'loopback'],
    ['::', 'unspecified'],
    ['fc00::1', 'private'],
    ['fdff:ffff::1', 'private'],
    ['fd00:ec2::254', 'metadata'],
    ['fd00:ec2::253', 'private'],
    ['fe80::1', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'public'],
    ['2001:4860:4860::8888', 'public'],
    // IPv4-mapped IPv6 is the IPv4 address it carries, in dotted and hex spelling.
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::ffff:169.254.169.254', 'metadata'],
    ['::ffff:a00:5', 'private'],
    ['::ffff:8.8.8.8', 'public'],
    // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they carry.
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'metadata'],
    ['64:ff9b::10.0.0.5', 'private'],
    ['64:ff9b::808:808', 'public'],
    ['64:ff9b:1::8.8.8.8', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:a9fe:a9fe::1', 'metadata'],
    ['2002:c0a8:101:5::1', 'private'],
    ['2002:a9fe:1::', 'link-local'],
    ['2002:808:808::1', 'public'],
    ['2002::', 'unspecified'],
    ['2003:7f00:1::', 'public'],
    ['example.com', undefined],
    ['localhost', undefined],
  ])('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
  });
});

const rules = (...entries: string[]) => entries.map((e) => parseAllowRule(e) as CallbackAllowRule);

describe('evaluateCallbackTarget', () => {
  it.each<[string, string, string[], 'allow' | 'refuse']>([
    ['127.0.0.1', '127.0.0.1', [], 'refuse'],
    ['10.0.0.5', '10.0.0.5', [], 'refuse'],
    ['169.254.169.254', '169.254.169.254', [], 'refuse'],
    ['[::1]', '::1', [], 'refuse'],
    ['localhost', 'localhost', [], 'refuse'],
    ['app.localhost', 'app.localhost', [], 'refuse'],
    ['localhost.', 'localhost.', [], 'refuse'],
    ['LOCALHOST', 'LOCALHOST', [], 'refuse'],
    ['board.internal.', '10.0.0.9', ['board.internal'], 'allow'],
    ['board.example.com', 'board.example.com', [], 'allow'],
    ['8.8.8.8', '8.8.8.8', [], 'allow'],
    // After resolution: the host is a name, the address what it resolved to.
    ['board.example.com', '10.1.2.3', [], 'refuse'],
    ['board.example.com', '10.1.2.3', ['10.0.0.0/8'], 'allow'],
    ['board.example.com', '10.1.2.3', ['board.example.com'], 'allow'],
    ['board.example.com', '10.1.2.3', ['other.example.com'], 'refuse'],
    ['127.0.0.1', '127.0.0.1', ['127.0.0.1'], 'allow'],
    ['127.0.0.2', '127.0.0.2', ['127.0.0.1'], 'refuse'],
    ['127.0.0.2', '127.0.0.2', ['127.0.0.0/8'], 'allow'],
    ['10.0.0.5', '10.0.0.5', ['10.0.0.4/31'], 'allow'],
    ['10.0.0.6', '10.0.0.6', ['10.0.0.4/31'], 'refuse'],
    ['localhost', 'localhost', ['LocalHost'], 'allow'],
    ['localhost', '127.0.0.1', ['localhost'], 'allow'],
    ['[::1]', '::1', ['::1/128'], 'allow'],
    ['[fd12::1]', 'fd12::1', ['fc00::/7'], 'allow'],
    ['[fe80::1]', 'fe80::1', ['fc00::/7'], 'refuse'],
    // A mapped address is matched against IPv4 rules, and cannot slip past them.
    ['[::ffff:10.0.0.5]', '::ffff:10.0.0.5', [], 'refuse'],
    ['[::ffff:10.0.0.5]', '::ffff:10.0.0.5', ['10.0.0.0/24'], 'allow'],
    ['169.254.169.254', '169.254.169.254', ['0.0.0.0/0'], 'allow'],
    // An IPv6 carrying a private IPv4 is refused, and an IPv4 rule lets it through like the IPv4 itself.
    ['[64:ff9b::a9fe:a9fe]', '64:ff9b::a9fe:a9fe', [], 'refuse'],
    ['[2002:a00:5::1]', '2002:a00:5::1', [], 'refuse'],
    ['[2002:a00:5::1]', '2002:a00:5::1', ['10.0.0.0/24'], 'allow'],
    ['[64:ff9b::a00:5]', '64:ff9b::a00:5', ['10.0.0.0/24'], 'allow'],
    ['[64:ff9b::a00:5]', '64:ff9b::a00:5', ['10.0.1.0/24'], 'refuse'],
    ['[2002:808:808::1]', '2002:808:808::1', [], 'allow'],
  ])('%s at %s with allow %j: %s', (host, address, allow, action) => {
    const decision = evaluateCallbackTarget(host, address, rules(...allow));
    expect(decision.action).toBe(action);
    expect(decision.reason).toContain(address);
  });
});

describe('parseAllowRule and LANES_CALLBACK_ALLOW', () => {
  it.each([
    ['10.0.0.0/8', { kind: 'cidr', family: 4, bits: 8 }],
    ['127.0.0.1', { kind: 'cidr', family: 4, bits: 32 }],
    ['::1', { kind: 'cidr', family: 6, bits: 128 }],
    ['fc00::/7', { kind: 'cidr', family: 6, bits: 7 }],
    [' board.internal ', { kind: 'host', host: 'board.internal' }],
    ['10.0.0.0/33', { error: expect.stringContaining('10.0.0.0/33') }],
    ['10.0.0/8', { error: expect.stringContaining('10.0.0/8') }],
    ['::1/129', { error: expect.stringContaining('::1/129') }],
    ['http://x', { error: expect.stringContaining('http://x') }],
  ])('%j', (text, expected) => {
    expect(parseAllowRule(text)).toMatchObject(expected);
  });

  it('parses a comma-separated list at boot', () => {
    const env = parseEnv({ LANES_CALLBACK_ALLOW: '127.0.0.1, 10.0.0.0/8,board.internal' });
    expect(env.LANES_CALLBACK_ALLOW?.map((r) => r.kind)).toEqual(['cidr', 'cidr', 'host']);
  });

  it('refuses a bad entry, naming the variable', () => {
    expect(() => parseEnv({ LANES_CALLBACK_ALLOW: '127.0.0.1,10.0.0.0/99' })).toThrow(ConfigError);
    expect(() => parseEnv({ LANES_CALLBACK_ALLOW: '127.0.0.1,10.0.0.0/99' })).toThrow(/LANES_CALLBACK_ALLOW.*10\.0\.0\.0\/99/);
  });
});
