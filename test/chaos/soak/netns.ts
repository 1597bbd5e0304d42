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

/** Link down or up: with the host end down, nothing crosses the pair, and TCP just stalls. */
export function setLink(link: string, up: boolean): void {
  ip('link', 'set', link, up ? 'up' : 'down');
}

/** Removes a namespace or link if it exists; never throws (cleanup must run to the end). */
export function removeNet(kind: 'netns' | 'link', name: string): void {
  if (kind === 'netns') spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
  else spawnSync('ip', ['link', 'del', name], { stdio: 'ignore' });
}
