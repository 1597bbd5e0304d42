import { isIP } from 'node:net';

/**
 * Where a callback may go. A card's callbackUrl is chosen by whoever posts the card, so without this
 * the supervisor could be made to POST to its own metadata service or to anything on its private network.
 * Only ordinary global unicast is `public`; every other kind names why an address is refused.
 */
export type AddressKind =
  | 'public'
  | 'loopback'
  | 'private'
  | 'shared'
  | 'link-local'
  | 'metadata'
  | 'unspecified'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'benchmarking'
  | 'protocol'
  | 'reserved';

/** A parsed address: family and value as one integer (IPv4-mapped IPv6 is read as the IPv4 it carries). */
interface Ip {
  family: 4 | 6;
  value: bigint;
}

/** A LANES_CALLBACK_ALLOW entry: a hostname (matched exactly, case-insensitive) or a CIDR range (a bare IP is /32 or /128). */
export type CallbackAllowRule = { kind: 'host'; host: string } | { kind: 'cidr'; family: 4 | 6; value: bigint; bits: number; text: string };

function parseV4(text: string): bigint | undefined {
  if (isIP(text) !== 4) return undefined;
  return text.split('.').reduce((acc, part) => (acc << 8n) | BigInt(Number(part)), 0n);
}

function parseV6(text: string): bigint | undefined {
  if (isIP(text) !== 6) return undefined;
  let head = text.split('%')[0]!;
  // A dotted IPv4 tail (::ffff:1.2.3.4) is two 16-bit groups.
  const tail = /(\d+\.\d+\.\d+\.\d+)$/.exec(head);
  if (tail) {
    const v4 = parseV4(tail[1]!)!;
    head = `${head.slice(0, -tail[1]!.length)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [left, right] = head.split('::') as [string, string | undefined];
  const groups = (s: string) => (s === '' ? [] : s.split(':'));
  const l = groups(left);
  const r = right === undefined ? [] : groups(right);
  const all = right === undefined ? l : [...l, ...Array<string>(8 - l.length - r.length).fill('0'), ...r];
  return all.reduce((acc, g) => (acc << 16n) | BigInt(parseInt(g, 16)), 0n);
}

const MAPPED_PREFIX = 0xffffn << 32n;

/** Parses an IP literal (brackets allowed); undefined for anything else, hostnames included. */
export function parseIp(text: string): Ip | undefined {
  const bare = text.startsWith('[') && text.endsWith(']') ? text.slice(1, -1) : text;
  const v4 = parseV4(bare);
  if (v4 !== undefined) return { family: 4, value: v4 };
  const v6 = parseV6(bare);
  if (v6 === undefined) return undefined;
  if (v6 >> 32n === 0xffffn) return { family: 4, value: v6 - MAPPED_PREFIX };
  return { family: 6, value: v6 };
}

const inRange = (ip: Ip, family: 4 | 6, base: bigint, bits: number) => {
  if (ip.family !== family) return false;
  const shift = BigInt((family === 4 ? 32 : 128) - bits);
  return ip.value >> shift === base >> shift;
};

/** One range of the table: its kind, and what it is, with where that comes from. */
export interface NonGlobalRange {
  cidr: string;
  kind: Exclude<AddressKind, 'public'>;
  what: string;
}

/**
 * Every address that is not ordinary global unicast, in one table; the first match wins, so an
 * address inside two ranges (metadata inside link-local, broadcast inside reserved) takes the first.
 *
 * Sources: the IANA IPv4 and IPv6 Special-Purpose Address Registries (RFC 6890 and the RFCs each
 * row names; every row that registry marks "globally reachable: false", and its anycast and
 * deprecated rows too, since no board's webhook lives there), the IANA multicast registries, the
 * IANA IPv6 Address Space registry (only 2000::/3 is allocated as global unicast; everything else is
 * reserved by the IETF), RFC 919 (limited broadcast), RFC 3879 (site-local), RFC 4291 §2.5.5.1
 * (IPv4-compatible IPv6). Python's `ipaddress` (`is_global` false, or `is_multicast`,
 * `is_reserved`, `is_site_local`) and Go's `netip` agree on each row.
 *
 * IPv4-mapped IPv6 (::ffff:0:0/96) is parsed as the IPv4 it carries; NAT64's well-known prefix
 * (64:ff9b::/96, RFC 6052) and 6to4 (2002::/16, RFC 3056) are judged as the IPv4 they embed (see `embeddedV4`).
 */
export const NON_GLOBAL_RANGES: readonly NonGlobalRange[] = [
  { cidr: '169.254.169.254/32', kind: 'metadata', what: 'the cloud metadata service' },
  { cidr: '0.0.0.0/8', kind: 'unspecified', what: '"this network" (RFC 791)' },
  { cidr: '10.0.0.0/8', kind: 'private', what: 'private (RFC 1918)' },
  // Carrier-grade NAT space is private to a provider's network, as reachable from inside as RFC 1918.
  { cidr: '100.64.0.0/10', kind: 'shared', what: 'shared address space (RFC 6598)' },
  { cidr: '127.0.0.0/8', kind: 'loopback', what: 'loopback (RFC 1122)' },
  { cidr: '169.254.0.0/16', kind: 'link-local', what: 'link-local (RFC 3927)' },
  { cidr: '172.16.0.0/12', kind: 'private', what: 'private (RFC 1918)' },
  // DS-Lite (192.0.0.0/29), NAT64 discovery (192.0.0.170-171, RFC 7050), the PCP and TURN anycasts.
  { cidr: '192.0.0.0/24', kind: 'protocol', what: 'IETF protocol assignments (RFC 6890)' },
  { cidr: '192.0.2.0/24', kind: 'documentation', what: 'documentation, TEST-NET-1 (RFC 5737)' },
  { cidr: '192.88.99.0/24', kind: 'reserved', what: 'the deprecated 6to4 relay anycast (RFC 7526)' },
  { cidr: '192.168.0.0/16', kind: 'private', what: 'private (RFC 1918)' },
  { cidr: '198.18.0.0/15', kind: 'benchmarking', what: 'benchmarking (RFC 2544)' },
  { cidr: '198.51.100.0/24', kind: 'documentation', what: 'documentation, TEST-NET-2 (RFC 5737)' },
  { cidr: '203.0.113.0/24', kind: 'documentation', what: 'documentation, TEST-NET-3 (RFC 5737)' },
  { cidr: '224.0.0.0/4', kind: 'multicast', what: 'multicast (RFC 5771)' },
  { cidr: '255.255.255.255/32', kind: 'broadcast', what: 'limited broadcast (RFC 919)' },
  { cidr: '240.0.0.0/4', kind: 'reserved', what: 'reserved for future use (RFC 1112)' },
  { cidr: 'fd00:ec2::254/128', kind: 'metadata', what: 'the cloud metadata service' },
  { cidr: '::/128', kind: 'unspecified', what: 'unspecified (RFC 4291)' },
  { cidr: '::1/128', kind: 'loopback', what: 'loopback (RFC 4291)' },
  { cidr: '::/96', kind: 'reserved', what: 'IPv4-compatible IPv6, deprecated (RFC 4291)' },
  // Local-use NAT64 (RFC 8215): the operator picks where the IPv4 sits, so the whole prefix is inward.
  { cidr: '64:ff9b:1::/48', kind: 'private', what: 'local-use NAT64 (RFC 8215)' },
  { cidr: '100::/64', kind: 'reserved', what: 'discard-only (RFC 6666)' },
  // Teredo (2001::/32), benchmarking (2001:2::/48), ORCHID, AMT, AS112 and the PCP and TURN anycasts.
  { cidr: '2001::/23', kind: 'protocol', what: 'IETF protocol assignments (RFC 2928)' },
  { cidr: '2001:db8::/32', kind: 'documentation', what: 'documentation (RFC 3849)' },
  { cidr: '3fff::/20', kind: 'documentation', what: 'documentation (RFC 9637)' },
  { cidr: '5f00::/16', kind: 'reserved', what: 'SRv6 SIDs (RFC 9602)' },
  { cidr: 'fc00::/7', kind: 'private', what: 'unique local (RFC 4193)' },
  { cidr: 'fe80::/10', kind: 'link-local', what: 'link-local (RFC 4291)' },
  { cidr: 'fec0::/10', kind: 'reserved', what: 'site-local, deprecated (RFC 3879)' },
  { cidr: 'ff00::/8', kind: 'multicast', what: 'multicast (RFC 4291)' },
  // What is left outside 2000::/3, the one block IANA allocates as global unicast (IANA IPv6 Address Space).
  { cidr: '::/3', kind: 'reserved', what: 'reserved by the IETF, outside global unicast 2000::/3' },
  { cidr: '4000::/2', kind: 'reserved', what: 'reserved by the IETF, outside global unicast 2000::/3' },
  { cidr: '8000::/1', kind: 'reserved', what: 'reserved by the IETF, outside global unicast 2000::/3' },
];
const PARSED_RANGES = NON_GLOBAL_RANGES.map((r) => ({ range: r, rule: parseCidr(r.cidr)! }));

const NAT64_PREFIX = 0x64ff9bn << 96n;
const SIX_TO_FOUR_PREFIX = 0x2002n;
const V4_MASK = 0xffffffffn;

/**
 * The IPv4 address an IPv6 one carries to a v4 host: NAT64's well-known prefix (64:ff9b::/96, the
 * low 32 bits) and 6to4 (2002:AABB:CCDD::/48). Such an address reaches that IPv4 host, so it is judged as it.
 */
function embeddedV4(ip: Ip): Ip | undefined {
  if (ip.family !== 6) return undefined;
  if (ip.value >> 32n === NAT64_PREFIX >> 32n) return { family: 4, value: ip.value & V4_MASK };
  if (ip.value >> 112n === SIX_TO_FOUR_PREFIX) return { family: 4, value: (ip.value >> 80n) & V4_MASK };
  return undefined;
}

/** The first range of the table holding `ip`, undefined for ordinary global unicast. */
const rangeOf = (ip: Ip): NonGlobalRange | undefined => PARSED_RANGES.find(({ rule }) => inRange(ip, rule.family, rule.value, rule.bits))?.range;

/** The range an address is judged by: an IPv6 one carrying an IPv4 (NAT64, 6to4) is that IPv4. */
const judgedRange = (ip: Ip): NonGlobalRange | undefined => rangeOf(embeddedV4(ip) ?? ip);

/** What kind of address an IP literal is (an IPv6 one carrying an IPv4 is that IPv4's kind); undefined when the text is not an IP. */
export function classifyAddress(address: string): AddressKind | undefined {
  const ip = parseIp(address);
  if (!ip) return undefined;
  return judgedRange(ip)?.kind ?? 'public';
}

function parseCidr(text: string): Extract<CallbackAllowRule, { kind: 'cidr' }> | undefined {
  const [addr, bitsText, extra] = text.split('/');
  if (extra !== undefined || addr === undefined) return undefined;
  const ip = parseIp(addr);
  if (!ip) return undefined;
  const max = ip.family === 4 ? 32 : 128;
  const bits = bitsText === undefined ? max : /^\d{1,3}$/.test(bitsText) ? Number(bitsText) : NaN;
  if (!(bits >= 0 && bits <= max)) return undefined;
  return { kind: 'cidr', family: ip.family, value: ip.value, bits, text };
}

const HOSTNAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,62})(\.[a-z0-9_]([a-z0-9_-]{0,62}))*$/i;

/** One LANES_CALLBACK_ALLOW entry, or an error message naming what is wrong with it. */
export function parseAllowRule(text: string): CallbackAllowRule | { error: string } {
  const entry = text.trim();
  if (parseIp(entry.split('/')[0] ?? '') || entry.includes('/')) return parseCidr(entry) ?? { error: `"${entry}" is not a valid IP or CIDR range` };
  if (HOSTNAME.test(entry)) return { kind: 'host', host: entry.toLowerCase() };
  return { error: `"${entry}" is neither a hostname nor an IP or CIDR range` };
}

/** A hostname that names this machine without DNS: refused like a loopback literal. */
const isLocalhostName = (host: string) => host === 'localhost' || host.endsWith('.localhost');

export type CallbackTargetDecision = { action: 'allow'; reason: string } | { action: 'refuse'; kind: Exclude<AddressKind, 'public'>; reason: string };

/**
 * Whether a callback may go to `address` (an IP, or a hostname not yet resolved) reached through `host`.
 * A hostname that is not localhost is allowed here: the delivery checks what it resolves to.
 */
export function evaluateCallbackTarget(host: string, address: string, allow: readonly CallbackAllowRule[]): CallbackTargetDecision {
  // A trailing dot is the same name, fully qualified: `localhost.` must not slip past `localhost`.
  const name = host
    .toLowerCase()
    .replace(/^\[|\]$/g, '')
    .replace(/\.$/, '');
  if (allow.some((r) => r.kind === 'host' && r.host === name)) return { action: 'allow', reason: `${address} reached as ${name}, which is in LANES_CALLBACK_ALLOW` };
  const ip = parseIp(address);
  if (!ip) {
    if (isLocalhostName(address.toLowerCase().replace(/\.$/, '')))
      return { action: 'refuse', kind: 'loopback', reason: `${address} is this machine (loopback); set LANES_CALLBACK_ALLOW to allow it` };
    return { action: 'allow', reason: `${address} is a hostname; checked again after resolution` };
  }
  const range = judgedRange(ip);
  if (!range) return { action: 'allow', reason: `${address} is a public address` };
  const { kind } = range;
  const carried = embeddedV4(ip);
  const rule = allow.find((r) => r.kind === 'cidr' && (inRange(ip, r.family, r.value, r.bits) || (carried !== undefined && inRange(carried, r.family, r.value, r.bits))));
  if (rule && rule.kind === 'cidr') return { action: 'allow', reason: `${address} is ${range.what} but in LANES_CALLBACK_ALLOW (${rule.text})` };
  return { action: 'refuse', kind, reason: `${address} is ${range.what}, not ordinary global unicast; set LANES_CALLBACK_ALLOW to allow it` };
}
