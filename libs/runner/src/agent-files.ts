import type { SandboxHandle } from '@lanes/sandbox';
import type { CardPaths } from './card-paths.js';

export interface AgentFiles {
  result?: unknown;
  resultError?: string;
  blocked?: { reason: string };
}

const decoder = new TextDecoder();

/** Reads result.json and blocked.json; a missing file is normal, an unreadable one is reported. */
export async function readAgentFiles(handle: SandboxHandle, paths: CardPaths): Promise<AgentFiles> {
  const out: AgentFiles = {};
  const [result, blocked] = await Promise.all([
    handle.readFile(paths.resultFile).catch(() => undefined),
    handle.readFile(paths.blockedFile).catch(() => undefined),
  ]);
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
