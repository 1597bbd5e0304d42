/**
 * Part of the benches: the burst benches' agent. A bash script whose first act appends its card
 * id, `$EPOCHREALTIME` (the wall clock in µs, read without a fork) and its card file's path (which
 * names the sandbox's workdir) to a stamp file, then works `workMs`, so a card holds its slot.
 * Used by burst.ts and probes/burst-{cpu,timeline,chain,split}.ts and probes/provider-canary.ts.
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface StampAgent {
  /** A scratch directory, open to every uid (sandboxes may run as another). */
  dir: string;
  stampFile: string;
  /** The agent's path: run it as `bash <agent>`. */
  agent: string;
  /** Where the stamp file ends now: stamps from here on are the next round's. */
  offset(): number;
  /** Each sandbox's first stamp since `offset`, of cards whose id starts with `idPrefix`, in stamp order. */
  firstBySandbox(offset: number, idPrefix?: string): Map<string, { id: string; at: number }>;
  remove(): void;
}

export function makeStampAgent(dirPrefix: string, workMs: number): StampAgent {
  const dir = mkdtempSync(join(tmpdir(), dirPrefix));
  chmodSync(dir, 0o777);
  const stampFile = join(dir, 'stamps');
  writeFileSync(stampFile, '');
  chmodSync(stampFile, 0o666);
  const agent = join(dir, 'agent.sh');
  writeFileSync(agent, `printf '%s %s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" "$LANES_CARD_FILE" >> ${stampFile}\nsleep ${(workMs / 1000).toFixed(3)}\n`);
  chmodSync(agent, 0o755);
  return {
    dir,
    stampFile,
    agent,
    offset: () => readFileSync(stampFile, 'utf8').length,
    firstBySandbox: (offset, idPrefix = '') => {
      const first = new Map<string, { id: string; at: number }>();
      for (const line of readFileSync(stampFile, 'utf8').slice(offset).split('\n').filter(Boolean)) {
        const [id, at, file] = line.split(' ');
        const sandbox = file!.split('/cards/')[0]!;
        if (id!.startsWith(idPrefix) && !first.has(sandbox)) first.set(sandbox, { id: id!, at: Number(at) * 1000 });
      }
      return first;
    },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}
