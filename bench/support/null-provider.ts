/**
 * A sandbox provider for benches only: its sandboxes exist at once, and every exec answers at once
 * with exit 0 (an `echo` answers its arguments, so the canary passes). No process, file or network
 * work: what a bench measures over it is lanes' own cost per slot, not forks.
 */
import type { PollResult, SandboxSpec, SandboxTags } from '@lanes/contracts';
import type { ExecResult, SandboxHandle, SandboxProvider, SandboxRef } from '@lanes/sandbox';

const answer = (stdout = ''): ExecResult => ({ exitCode: 0, stdout, stderr: '', timedOut: false, cancelled: false, durationMs: 0 });

export function createNullProvider(): SandboxProvider {
  const live = new Map<string, Partial<SandboxTags>>();
  let next = 0;
  return {
    name: 'null',
    async create(spec: SandboxSpec): Promise<SandboxHandle> {
      const id = `null-${process.pid}-${next++}`;
      live.set(id, { ...spec.tags });
      return {
        id,
        provider: 'null',
        workdir: `/null/${id}`,
        exec: async (argv) => {
          if (!live.has(id)) throw new Error(`null sandbox ${id} is gone`);
          return answer(argv[0] === 'echo' ? `${argv.slice(1).join(' ')}\n` : '');
        },
        poll: async (): Promise<PollResult> => (live.has(id) ? { state: 'live' } : { state: 'missing' }),
        writeFile: async () => undefined,
        readFile: async () => undefined,
        resetDirs: async () => answer(),
        terminate: async () => {
          live.delete(id);
        },
      };
    },
    async list(tags?: Partial<SandboxTags>): Promise<SandboxRef[]> {
      const wanted = Object.entries(tags ?? {});
      return [...live].filter(([, t]) => wanted.every(([k, v]) => t[k as keyof SandboxTags] === v)).map(([id, t]) => ({ id, tags: t }));
    },
    async terminateById(id: string): Promise<void> {
      live.delete(id);
    },
    async close(): Promise<void> {},
  };
}
