import { execFileSync } from 'node:child_process';
import { mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxSpec } from '@lanes/contracts';
import { LocalSandboxProvider, detectIsolation, type LocalProviderOptions } from '@lanes/sandbox';
import { findByEnvEntry } from '../../src/proc.js';
import type { ContractFixture } from '../contract-suite.js';

/** Short grace keeps kill tests fast while still exercising every escalation step. */
export const TEST_KILL_GRACE_MS = 200;

export function testSpec(slot = 's1'): SandboxSpec {
  return { image: 'local', tags: { lane: 'contract', slot, worker: `w-${process.pid}` }, env: { LANES_TEST_SPEC_ENV: 'from-spec' } };
}

export interface LocalFixture extends ContractFixture {
  provider: LocalSandboxProvider;
  baseDir: string;
}

/** A provider on its own temp baseDir; cleanup reaps every sandbox under it and removes the dir. */
export async function localFixture(options: Omit<LocalProviderOptions, 'baseDir'> = {}): Promise<LocalFixture> {
  const baseDir = await mkdtemp(join(tmpdir(), 'lanes-sbx-test-'));
  // The mode these suites were written for unless a test names one: `auto` would pick separate-uid on
  // a root machine, where the contract's own checks look into lanes' directories from inside the
  // sandbox, which that mode forbids by design (separate-uid.test.ts covers it).
  const provider = new LocalSandboxProvider({ killGraceMs: TEST_KILL_GRACE_MS, isolation: detectIsolation(), ...options, baseDir });
  return {
    provider,
    baseDir,
    spec: testSpec(),
    killGraceMs: TEST_KILL_GRACE_MS,
    liveHostPids: (envEntry) => findByEnvEntry(envEntry).map((p) => p.pid),
    // A local sandbox's files are the host's: list them as the worker does.
    listTree: async (_handle, dir) => execFileSync('sh', ['-c', 'cd "$1" && find . | sort', 'list', dir], { encoding: 'utf8' }).split('\n').filter(Boolean),
    killRoot: async (handle) => {
      if (handle.pid === undefined) throw new Error('local handles always have a pid');
      process.kill(handle.pid, 'SIGKILL');
    },
    cleanup: async () => {
      // Every directory, live or not: terminateById also sweeps processes a dead root left behind.
      for (const id of await readdir(baseDir).catch(() => [])) await provider.terminateById(id);
      await provider.close();
      await rm(baseDir, { recursive: true, force: true });
    },
  };
}
