import { ProviderUnavailableError } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import type { CardPaths } from './card-paths.js';

export interface AgentFiles {
  result?: unknown;
  resultError?: string;
  blocked?: { reason: string };
  /**
   * A file could not be read (not "missing": the read itself failed). What the agent decided is
   * unknown, so this is never a `done` and never hides a blocked.json. `transient` when the provider
   * was unreachable.
   */
  readError?: { message: string; transient: boolean };
}

type Read = { bytes: Uint8Array | undefined } | { error: unknown };

async function read(handle: SandboxHandle, path: string): Promise<Read> {
  try {
    return { bytes: await handle.readFile(path) };
  } catch (error) {
    return { error };
  }
}

const decoder = new TextDecoder();

/** Reads result.json and blocked.json; a missing file is normal, a failed read is reported as such. */
export async function readAgentFiles(handle: SandboxHandle, paths: CardPaths): Promise<AgentFiles> {
  const out: AgentFiles = {};
  const reads = await Promise.all([read(handle, paths.resultFile), read(handle, paths.blockedFile)]);
  for (const [i, r] of reads.entries()) {
    if (!('error' in r)) continue;
    const name = i === 0 ? 'result.json' : 'blocked.json';
    out.readError = { message: `could not read ${name}: ${r.error instanceof Error ? r.error.message : String(r.error)}`, transient: r.error instanceof ProviderUnavailableError };
    return out;
  }
  const [result, blocked] = reads.map((r) => ('bytes' in r ? r.bytes : undefined));
  if (result) {
    try {
      out.result = JSON.parse(decoder.decode(result));
    } catch {
      out.resultError = 'result.json is not valid JSON';
    }
  }
  if (blocked) {
    let reason = 'the agent wrote blocked.json';
    try {
      const parsed = JSON.parse(decoder.decode(blocked)) as { reason?: unknown };
      if (typeof parsed.reason === 'string' && parsed.reason) reason = parsed.reason;
    } catch {
      reason = decoder.decode(blocked).trim().slice(0, 500) || reason;
    }
    out.blocked = { reason };
  }
  return out;
}
