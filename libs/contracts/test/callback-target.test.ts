import { describe, expect, it } from 'vitest';
import { ConfigError, NON_GLOBAL_RANGES, classifyAddress, evaluateCallbackTarget, parseAllowRule, parseEnv, parseIp, type CallbackAllowRule } from '@lanes/contracts';

/**
 * Every range of NON_GLOBAL_RANGES: its first and last address, and a neighbour just outside
 * (public where the neighbour is ordinary global unicast; else the kind of the range it falls in).
 * The addresses the issue found called public are here as they were written there.
 */
const TABLE: Array<[string, string | undefined]> = [
  ['169.254.169.254', 'metadata'],
  ['169.254.169.253', 'link-local'],
  ['169.254.169.255', 'link-local'],
  ['0.0.0.0', 'unspecified'],
  ['0.255.255.255', 'unspecified'],
  ['1.0.0.0', 'public'],
  ['10.0.0.0', 'private'],
  ['10.255.255.255', 'private'],
  ['9.255.255.255', 'public'],
  ['11.0.0.0', 'public'],
  ['100.64.0.0', 'shared'],
  ['100.127.255.255', 'shared'],
  ['100.63.255.255', 'public'],
  ['100.128.0.0', 'public'],
  ['127.0.0.0', 'loopback'],
  ['127.255.255.255', 'loopback'],
  ['126.255.255.255', 'public'],
  ['128.0.0.0', 'public'],
  ['169.254.0.0', 'link-local'],
  ['169.254.255.255', 'link-local'],
  ['169.253.255.255', 'public'],
  ['169.255.0.0', 'public'],
  ['172.16.0.0', 'private'],
  ['172.31.255.255', 'private'],
  ['172.15.255.255', 'public'],
  ['172.32.0.0', 'public'],
  ['192.0.0.0', 'protocol'],
  ['192.0.0.170', 'protocol'],
  ['192.0.0.171', 'protocol'],
  ['192.0.0.255', 'protocol'],
  ['191.255.255.255', 'public'],
  ['192.0.1.0', 'public'],
  ['192.0.2.0', 'documentation'],
  ['192.0.2.255', 'documentation'],
  ['192.0.1.255', 'public'],
  ['192.0.3.0', 'public'],
  ['192.88.99.0', 'reserved'],
  ['192.88.99.255', 'reserved'],
  ['192.88.98.255', 'public'],
  ['192.88.100.0', 'public'],
  ['192.168.0.0', 'private'],
  ['192.168.255.255', 'private'],
  ['192.167.255.255', 'public'],
  ['192.169.0.0', 'public'],
  ['198.18.0.0', 'benchmarking'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking'],
  ['198.17.255.255', 'public'],
  ['198.20.0.0', 'public'],
  ['198.51.100.0', 'documentation'],
  ['198.51.100.255', 'documentation'],
  ['198.51.99.255', 'public'],
  ['198.51.101.0', 'public'],
  ['203.0.113.0', 'documentation'],
  ['203.0.113.255', 'documentation'],
  ['203.0.112.255', 'public'],
  ['203.0.114.0', 'public'],
  ['224.0.0.0', 'multicast'],
  ['224.0.0.1', 'multicast'],
  ['239.255.255.255', 'multicast'],
  ['223.255.255.255', 'public'],
  ['255.255.255.255', 'broadcast'],
  ['240.0.0.0', 'reserved'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.254', 'reserved'],
  ['8.8.8.8', 'public'],
  ['1.1.1.1', 'public'],
  ['fd00:ec2::254', 'metadata'],
  ['fd00:ec2::253', 'private'],
  ['fd00:ec2::255', 'private'],
  ['::', 'unspecified'],
  ['[::]', 'unspecified'],
  ['::1', 'loopback'],
  ['[::1]', 'loopback'],
  // IPv4-compatible ::a.b.c.d (deprecated): refused whatever IPv4 it spells.
  ['::2', 'reserved'],
  ['::8.8.8.8', 'reserved'],
  ['::127.0.0.1', 'reserved'],
  ['::ffff:ffff', 'reserved'],
  ['::1:0:0', 'reserved'],
  ['64:ff9b:1::', 'private'],
  ['64:ff9b:1::8.8.8.8', 'private'],
  ['64:ff9b:1:ffff:ffff:ffff:ffff:ffff', 'private'],
  ['64:ff9b:2::', 'reserved'],
  ['64:ff9b:0:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['100::', 'reserved'],
  ['100::ffff:ffff:ffff:ffff', 'reserved'],
  ['100:0:0:1::', 'reserved'],
  ['2001::', 'protocol'],
  // Teredo, and IPv6 benchmarking (2001:2::/48).
  ['2001:0:4136:e378:8000:63bf:3fff:fdd2', 'protocol'],
  ['2001:2::1', 'protocol'],
  ['2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff', 'protocol'],
  ['2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'],
  ['2001:200::', 'public'],
  ['2001:db8::', 'documentation'],
  ['2001:db8:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'],
  ['2001:db7:ffff:ffff:ffff:ffff:ffff:ffff', 'public'],
  ['2001:db9::', 'public'],
  ['3fff::', 'documentation'],
  ['3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff', 'documentation'],
  ['3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'],
  ['3fff:1000::', 'public'],
  ['5f00::', 'reserved'],
  ['5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['fc00::', 'private'],
  ['fc00::1', 'private'],
  ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'private'],
  ['fbff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['fe80::', 'link-local'],
  ['fe80::1', 'link-local'],
  ['febf:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'link-local'],
  ['fe7f:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['fec0::', 'reserved'],
  ['fec0::1', 'reserved'],
  ['feff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['ff00::', 'multicast'],
  ['ff02::1', 'multicast'],
  ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'multicast'],
  ['1fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['2000::', 'public'],
  ['4000::', 'reserved'],
  ['7fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'reserved'],
  ['3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'public'],
  ['8000::', 'reserved'],
  ['2001:4860:4860::8888', 'public'],
  ['2606:4700::1111', 'public'],
  // AS112 direct delegation: in the special-purpose registry, but globally reachable.
  ['2620:4f:8000::1', 'public'],
  // IPv4-mapped IPv6 is the IPv4 address it carries, in dotted and hex spelling.
  ['::ffff:0:0', 'unspecified'],
  ['::ffff:127.0.0.1', 'loopback'],
  ['::ffff:7f00:1', 'loopback'],
  ['::ffff:169.254.169.254', 'metadata'],
  ['::ffff:a00:5', 'private'],
  ['::ffff:198.18.0.1', 'benchmarking'],
  ['::ffff:255.255.255.255', 'broadcast'],
  ['::ffff:8.8.8.8', 'public'],
  // NAT64 (64:ff9b::/96) and 6to4 (2002::/16) reach the IPv4 address they carry.
  ['64:ff9b::', 'unspecified'],
  ['64:ff9b::7f00:1', 'loopback'],
  ['64:ff9b::127.0.0.1', 'loopback'],
  ['64:ff9b::a9fe:a9fe', 'metadata'],
  ['64:ff9b::10.0.0.5', 'private'],
  ['64:ff9b::c612:1', 'benchmarking'],
  ['64:ff9b::e000:1', 'multicast'],
  ['64:ff9b::ffff:ffff', 'broadcast'],
  ['64:ff9b::808:808', 'public'],
  ['64:ff9b::1:0:0', 'reserved'],
  ['2002:7f00:1::', 'loopback'],
  ['2002:a9fe:a9fe::1', 'metadata'],
  ['2002:c0a8:101:5::1', 'private'],
  ['2002:a9fe:1::', 'link-local'],
  ['2002:c612:1::', 'benchmarking'],
  ['2002:c000:aa::', 'protocol'],
  ['2002:f000:1::', 'reserved'],
  ['2002:ffff:ffff::', 'broadcast'],
  ['2002:808:808::1', 'public'],
  ['2002::', 'unspecified'],
  ['2003:7f00:1::', 'public'],
  ['example.com', undefined],
  ['localhost', undefined],
];

describe('classifyAddress', () => {
  it.each(TABLE)('%s is %s', (address, kind) => {
    expect(classifyAddress(address)).toBe(kind);
  });

  it('the table holds the first and last address of every range of NON_GLOBAL_RANGES', () => {
    const values = new Set(TABLE.map(([a]) => parseIp(a)).flatMap((ip) => (ip ? [`${ip.family}/${ip.value}`] : [])));
    const missing = NON_GLOBAL_RANGES.flatMap(({ cidr }) => {
      const [base, bits] = cidr.split('/') as [string, string];
      const ip = parseIp(base)!;
      const width = BigInt((ip.family === 4 ? 32 : 128) - Number(bits));
      const first = (ip.value >> width) << width;
      const last = first + (1n << width) - 1n;
      // The mapped block is read as IPv4, so its first and last are the IPv4 ends.
      return [first, last].filter((v) => !values.has(`${ip.family}/${v}`) && !(ip.family === 6 && values.has(`4/${v - (0xffffn << 32n)}`))).map((v) => `${cidr}: ${v}`);
    });
    expect(missing).toEqual([]);
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
    // Not ordinary global unicast: refused, and an allow rule still lets one through.
    ['198.18.0.1', '198.18.0.1', [], 'refuse'],
    ['[ff02::1]', 'ff02::1', [], 'refuse'],
    ['[::8.8.8.8]', '::8.8.8.8', [], 'refuse'],
    ['240.0.0.1', '240.0.0.1', ['240.0.0.0/4'], 'allow'],
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

  it('takes a previous callback secret for a rotation, only beside the current one', () => {
    const current = 'the-new-callback-secret';
    const previous = 'the-old-callback-secret';
    expect(parseEnv({ LANES_CALLBACK_SECRET: current, LANES_CALLBACK_SECRET_PREVIOUS: previous })).toMatchObject({
      LANES_CALLBACK_SECRET: current,
      LANES_CALLBACK_SECRET_PREVIOUS: previous,
    });
    expect(() => parseEnv({ LANES_CALLBACK_SECRET_PREVIOUS: previous })).toThrow(/LANES_CALLBACK_SECRET_PREVIOUS/);
    expect(() => parseEnv({ LANES_CALLBACK_SECRET: current, LANES_CALLBACK_SECRET_PREVIOUS: 'short' })).toThrow(/LANES_CALLBACK_SECRET_PREVIOUS/);
  });
});
