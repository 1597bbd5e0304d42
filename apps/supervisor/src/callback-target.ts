import { lookup as dnsLookup } from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { evaluateCallbackTarget, parseIp, type CallbackAllowRule } from '@lanes/contracts';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** Resolves a hostname to every address it has; injected so a test can name a host that resolves inward. */
export type CallbackLookup = (host: string) => Promise<ResolvedAddress[]>;

export const systemLookup: CallbackLookup = (host) => dnsLookup(host, { all: true, verbatim: true });

export type CallbackTarget =
  | { action: 'deliver'; address: string; family: number }
  | { action: 'refuse'; address: string; reason: string }
  | { action: 'unresolved'; reason: string };

/**
 * Where a delivery may connect: every address the host resolves to is checked, since a connection may use any.
 * The address returned is the one connected to, so a name cannot resolve outward here and inward at connect.
 */
export async function resolveCallbackTarget(url: URL, allow: readonly CallbackAllowRule[], lookup: CallbackLookup): Promise<CallbackTarget> {
  const host = url.hostname.replace(/^\[|\]$/g, '');
  let addresses: ResolvedAddress[];
  if (parseIp(host)) {
    addresses = [{ address: host, family: host.includes(':') ? 6 : 4 }];
  } else {
    try {
      addresses = await lookup(host);
    } catch (err) {
      return { action: 'unresolved', reason: `cannot resolve ${host}: ${err instanceof Error ? err.message : String(err)}` };
    }
  }
  if (addresses.length === 0) return { action: 'unresolved', reason: `${host} resolves to no address` };
  for (const { address } of addresses) {
    const decision = evaluateCallbackTarget(host, address, allow);
    if (decision.action === 'refuse') return { action: 'refuse', address, reason: `${host} resolves to ${decision.reason}` };
  }
  return { action: 'deliver', address: addresses[0]!.address, family: addresses[0]!.family };
}

/**
 * POSTs to `url`, connecting only to the checked address; redirects are not followed (one could
 * point inward). Ends at `timeoutMs`, or when `cancel` aborts (the dispatcher stopping).
 */
export function postTo(
  url: URL,
  target: ResolvedAddress,
  body: string,
  headers: Record<string, string>,
  timeoutMs: number,
  cancel?: AbortSignal,
): Promise<{ status?: number; error?: string }> {
  const pinned: LookupFunction = (_host, options, callback) => {
    const cb = callback as (err: Error | null, address: string | ResolvedAddress[], family?: number) => void;
    if (options.all) cb(null, [{ address: target.address, family: target.family }]);
    else cb(null, target.address, target.family);
  };
  return new Promise((resolve) => {
    const request = (url.protocol === 'https:' ? https : http).request(
      url,
      {
        method: 'POST',
        headers: { ...headers, 'content-length': String(Buffer.byteLength(body)) },
        lookup: pinned,
        signal: cancel ? AbortSignal.any([AbortSignal.timeout(timeoutMs), cancel]) : AbortSignal.timeout(timeoutMs),
      },
      (res) => {
        res.resume();
        resolve({ status: res.statusCode ?? 0 });
      },
    );
    request.on('error', (err) => resolve({ error: err.message }));
    request.end(body);
  });
}
