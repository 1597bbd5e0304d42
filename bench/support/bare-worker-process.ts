/**
 * Part of the benches: starts bench/support/bare-worker.ts (the bare BullMQ `Worker` baseline) in a
 * process of its own and resolves once it says it is ready. For throughput and first-instruction.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';

export interface BareWorker {
  close(): Promise<void>;
}

/** `command`: what each job spawns (bare-worker.ts's own default when empty). */
export async function startBareWorkerProcess(url: string, queue: string, prefix: string, concurrency: number, command: readonly string[] = []): Promise<BareWorker> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(import.meta.dirname, 'bare-worker.ts'), url, queue, prefix, String(concurrency), ...command], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`bare worker exited ${code} before it was ready`)));
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => chunk.includes('ready') && resolve());
  });
  return {
    close: async () => {
      child.kill('SIGTERM');
      await exited;
    },
  };
}
