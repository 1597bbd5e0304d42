import { execFileSync, spawnSync } from 'node:child_process';

/** One worker's network namespace, joined to the host by a veth pair on its own /30. */
export interface WorkerNet {
  netns: string;
  /** Host end of the veth pair; setting it down partitions the worker. */
  hostLink: string;
  hostAddress: string;
  nsAddress: string;
}

/** Private block the soak takes its /30s from; a /24 inside it that nothing on this host routes is chosen per run. */
const BLOCK_FIRST_OCTETS = [10, 213] as const;

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'], encoding: 'utf8' });

/** Whether this machine lets us make namespaces and veth pairs (root, iproute2, a kernel that allows it). */
export function netnsAvailable(probeName: string): boolean {
  const add = spawnSync('ip', ['netns', 'add', probeName], { stdio: 'ignore' });
  if (add.status !== 0) return false;
  spawnSync('ip', ['netns', 'del', probeName], { stdio: 'ignore' });
  return true;
}

function ipv4ToInt(a: string): number {
  return a.split('.').reduce((n, o) => n * 256 + Number(o), 0);
}

/** Every IPv4 prefix this host already has an address or a route in, as [first, last] ranges. */
function usedRanges(): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  const add = (prefix: string) => {
    if (prefix === 'default') return out.push([0, 2 ** 32 - 1]);
    const [addr, lenText] = prefix.split('/');
    const len = lenText === undefined ? 32 : Number(lenText);
    const base = ipv4ToInt(addr!) - (ipv4ToInt(addr!) % 2 ** (32 - len));
    out.push([base, base + 2 ** (32 - len) - 1]);
  };
  for (const a of JSON.parse(ip('-j', '-4', 'addr', 'show')) as Array<{ addr_info?: Array<{ local: string; prefixlen: number }> }>) {
    for (const i of a.addr_info ?? []) add(`${i.local}/${i.prefixlen}`);
  }
  for (const r of JSON.parse(ip('-j', '-4', 'route', 'show', 'table', 'all')) as Array<{ dst: string; type?: string }>) {
    // The default route covers everything and says nothing about what is in use.
    if (r.dst !== 'default' && r.type !== 'broadcast') add(r.dst);
  }
  return out;
}

/** A /24 inside 10.213.0.0/16 that overlaps no address or route on this host, chosen from `seed`. */
export function pickSubnet(seed: number): string {
  const used = usedRanges();
  for (let k = 0; k < 256; k++) {
    const third = (seed + k) % 256;
    const first = ipv4ToInt(`${BLOCK_FIRST_OCTETS[0]}.${BLOCK_FIRST_OCTETS[1]}.${third}.0`);
    const last = first + 255;
    if (!used.some(([a, b]) => a <= last && b >= first)) return `${BLOCK_FIRST_OCTETS[0]}.${BLOCK_FIRST_OCTETS[1]}.${third}`;
  }
  throw new Error('no free /24 in 10.213.0.0/16 for the soak');
}

/**
 * Creates worker `index`'s namespace and veth pair: host end `<subnet>.<4i+1>/30`, namespace end
 * `<subnet>.<4i+2>/30`. `onCreated` is told each name before it exists, so a crash half-way
 * still gets it cleaned up.
 */
export function createWorkerNet(runId: string, index: number, subnet: string, onCreated: (kind: 'netns' | 'link', name: string) => void): WorkerNet {
  const netns = `lanes-soak-${runId}-w${index}`;
  // Interface names are at most 15 characters.
  const hostLink = `ls${runId}h${index}`;
  const nsLink = `ls${runId}n${index}`;
  const hostAddress = `${subnet}.${4 * index + 1}`;
  const nsAddress = `${subnet}.${4 * index + 2}`;
  onCreated('netns', netns);
  ip('netns', 'add', netns);
  onCreated('link', hostLink);
  ip('link', 'add', hostLink, 'type', 'veth', 'peer', 'name', nsLink);
  ip('link', 'set', nsLink, 'netns', netns);
  ip('addr', 'add', `${hostAddress}/30`, 'dev', hostLink);
  ip('link', 'set', hostLink, 'up');
  ip('-n', netns, 'addr', 'add', `${nsAddress}/30`, 'dev', nsLink);
  ip('-n', netns, 'link', 'set', nsLink, 'up');
  ip('-n', netns, 'link', 'set', 'lo', 'up');
  return { netns, hostLink, hostAddress, nsAddress };
}

/** The last octet of the Sentinel group's address inside the run's /24 (worker /30s stop well below it). */
const SERVICE_OCTET = 254;
/** Workers whose /30s fit below the service address. */
export const MAX_NETNS_WORKERS = Math.floor(SERVICE_OCTET / 4);

/**
 * One host address every namespace reaches, for a Redis that is more than one port: a Sentinel
 * group's sentinels tell every client the primary's address as they know it, so the sentinels, the
 * data nodes and the host's processes must all use an address that is the same from the host and
 * from each namespace (127.0.0.1 is each namespace's own loopback). It is `<subnet>.254/32` on a
 * host-only veth pair (a dummy link would do, but not every kernel has the module), and each worker's
 * namespace routes it through its own veth: with that veth down (a partition) the worker reaches
 * neither the sentinels nor the data nodes, and nothing else changes.
 */
export function createServiceAddress(runId: string, subnet: string, onCreated: (kind: 'link', name: string) => void): string {
  const link = `ls${runId}r`;
  const peer = `ls${runId}s`;
  const address = `${subnet}.${SERVICE_OCTET}`;
  onCreated('link', link);
  ip('link', 'add', link, 'type', 'veth', 'peer', 'name', peer);
  ip('addr', 'add', `${address}/32`, 'dev', link);
  ip('link', 'set', link, 'up');
  ip('link', 'set', peer, 'up');
  return address;
}

/** Routes `address` (the service address) from worker `net`'s namespace through its veth to the host. */
export function routeToHost(net: WorkerNet, address: string): void {
  ip('-n', net.netns, 'route', 'add', `${address}/32`, 'via', net.hostAddress);
}

/** Link down or up: with the host end down, nothing crosses the pair, and TCP just stalls. */
export function setLink(link: string, up: boolean): void {
  ip('link', 'set', link, up ? 'up' : 'down');
}

/** Removes a namespace or link if it exists; never throws (cleanup must run to the end). */
export function removeNet(kind: 'netns' | 'link', name: string): void {
  if (kind === 'netns') spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  else spawnSync('ip', ['link', 'del', name], { stdio: 'ignore' });
}
