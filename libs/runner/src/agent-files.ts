import { AgentFileError, ProviderUnavailableError, agentLimits } from '@lanes/contracts';
import type { SandboxHandle } from '@lanes/sandbox';
import type { CardPaths } from './card-paths.js';
import { capChars } from './cap-chars.js';

export interface AgentFiles {
  result?: unknown;
  resultError?: string;
  blocked?: { reason: string };
  /**
   * A file broke a reading rule (a link, a FIFO, over the cap): the agent's failure, named by file
   * and rule. The sandbox is fine and serves the next card.
   */
  refused?: string;
  /**
   * A file could not be read (not "missing": the read itself failed). What the agent decided is
   * unknown, so this is never a `done` and never hides a blocked.json. `transient` when the provider
   * was unreachable.
   */
  readError?: { message: string; transient: boolean };
}

type Read = { bytes: Uint8Array | undefined } | { error: unknown };

async function read(handle: SandboxHandle, path: string, maxBytes: number): Promise<Read> {
  try {
    return { bytes: await handle.readFile(path, { maxBytes }) };
  } catch (error) {
    return { error };
  }
}

const decoder = new TextDecoder();

/**
 * Reads result.json and blocked.json, each up to `maxBytes` and only as a regular file (the
 * handle's readFile): a missing file is normal, a refused one is the agent's failure, a failed read
 * is reported as such.
 */
export async function readAgentFiles(handle: SandboxHandle, paths: CardPaths, maxBytes: number): Promise<AgentFiles> {
  const out: AgentFiles = {};
  const reads = await Promise.all([read(handle, paths.resultFile, maxBytes), read(handle, paths.blockedFile, maxBytes)]);
  for (const [i, r] of reads.entries()) {
    if (!('error' in r)) continue;
    if (r.error instanceof AgentFileError) {
      out.refused = r.error.message;
      return out;
    }
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
  if (blocked) out.blocked = { reason: blockReason(decoder.decode(blocked)) };
  return out;
}

/** blocked.json's `reason`, or its text when it is not JSON with one; capped either way. */
function blockReason(text: string): string {
  let reason = 'the agent wrote blocked.json';
  try {
    const parsed = JSON.parse(text) as { reason?: unknown };
    if (typeof parsed.reason === 'string' && parsed.reason) reason = parsed.reason;
  } catch {
    reason = text.trim() || reason;
  }
  return capChars(reason, agentLimits.MAX_BLOCK_REASON_CHARS);
}
