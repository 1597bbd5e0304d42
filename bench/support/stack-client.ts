/**
 * Part of the benches: forks bench/support/stack-process.ts and talks to it (the bench's side of its IPC).
 */
import { fork } from 'node:child_process';
import { existsSync } from 'node:fs';
import type { StackProcessConfig, StackProcessReady, StackProcessReply, StackProcessRequest } from './stack-process.js';

export interface StackChild {
  url?: string;
  pid: number;
  rss(): Promise<{ rssBytes: number; heapUsedBytes: number }>;
  sweeps(n: number): Promise<number[]>;
  stop(): Promise<void>;
}

type Op = StackProcessRequest extends infer R ? (R extends { op: infer O } ? O : never) : never;

/** `checkout`: another checkout's bench/support/stack-process.ts (and so its code), e.g. a copy of an older commit. */
export async function startStackProcess(config: StackProcessConfig, checkout?: string): Promise<StackChild> {
  // An older checkout may keep it at bench/ itself, where it was first written.
  const script = checkout
    ? ([`${checkout}/bench/support/stack-process.ts`, `${checkout}/bench/stack-process.ts`].find((p) => existsSync(p)) ?? `${checkout}/bench/support/stack-process.ts`)
    : new URL('./stack-process.ts', import.meta.url).pathname;
  const child = fork(script, [JSON.stringify(config)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const ready = await new Promise<StackProcessReady>((resolve, reject) => {
    child.once('exit', (code) => reject(new Error(`stack process exited ${code} before it was ready`)));
    child.once('message', (m: StackProcessReady) => resolve(m));
  });
  let next = 0;
  const ask = (op: Op, extra: Record<string, unknown> = {}): Promise<StackProcessReply> =>
    new Promise((resolve, reject) => {
      const id = next++;
      const on = (m: StackProcessReply) => {
        if (m.id !== id) return;
        child.off('message', on);
        if (m.error) reject(new Error(m.error));
        else resolve(m);
      };
      child.on('message', on);
      child.send({ id, op, ...extra } as StackProcessRequest);
    });
  return {
    ...(ready.url ? { url: ready.url } : {}),
    pid: ready.pid,
    rss: async () => {
      const r = await ask('rss');
      return { rssBytes: r.rssBytes ?? 0, heapUsedBytes: r.heapUsedBytes ?? 0 };
    },
    sweeps: async (n) => (await ask('sweep', { n })).sweepMs ?? [],
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) {
        await ask('stop').catch(() => child.kill('SIGKILL'));
      }
      await exited;
    },
  };
}
