import { LanesError } from './lanes-error.js';

/**
 * Which rule a file an agent left broke. Agents are untrusted code: lanes reads back only regular
 * files, never through a link, and only up to a named cap.
 */
export type AgentFileRule = 'link' | 'not-regular' | 'too-large' | 'hard-link' | 'outside-workdir';

/**
 * A file the agent left (result.json, blocked.json) breaks a reading rule. The agent's failure, not
 * the sandbox's: the sandbox stays live, the slot serves the next card, and retrying the same read
 * cannot help. The message names the file and the rule, e.g. "result.json is a FIFO, not a regular file".
 */
export class AgentFileError extends LanesError {
  readonly code = 'AGENT_FILE_REFUSED';
  readonly retry = 'permanent' as const;
  constructor(
    /** The file's name as the agent protocol knows it (its last path component). */
    readonly file: string,
    readonly rule: AgentFileRule,
    detail: string,
  ) {
    super(`${file} ${detail}`);
  }
}

/** "40,000,008 bytes": sizes in refusals read at a glance. */
export function formatBytes(n: number): string {
  return `${n.toLocaleString('en-US')} bytes`;
}
