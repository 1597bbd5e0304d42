/**
 * Part of the benches: a lanes stack (any of API, worker, supervisor) in a process of its own, on
 * the local provider or the bench-only null provider (null-provider.ts), started with `fork` so
 * that it answers the bench over IPC. Its own process so that the bench's client, and other parts,
 * share neither its event loop nor its heap, as they would not in production.
 *
 *   fork('bench/support/stack-process.ts', [JSON.stringify(StackProcessConfig)])
 *
 * Says `{ ready, url, pid }` once up; answers `{ id, op: 'rss' | 'sweep' | 'stop' }` requests
 * with `{ id, … }` (a sweep request times n supervisor sweeps, one after another).
 */
import type { LaneConfigInput } from '@lanes/contracts';
import { startTestStack } from '../../test/harness/index.js';
import { createNullProvider } from './null-provider.js';

export interface StackProcessConfig {
  redisUrl: string;
  lanes: LaneConfigInput[];
  parts: { api: boolean; worker: boolean; supervisor: boolean };
  provider: 'local' | 'null';
  heartbeatIntervalMs: number;
  sandboxDir: string;
}
export type StackProcessReady = { ready: true; url?: string; pid: number };
export type StackProcessRequest = { id: number; op: 'rss' } | { id: number; op: 'sweep'; n: number } | { id: number; op: 'stop' };
export type StackProcessReply = { id: number; rssBytes?: number; heapUsedBytes?: number; sweepMs?: number[]; error?: string };

const config = JSON.parse(process.argv[2] ?? '') as StackProcessConfig;
const nullProvider = config.provider === 'null' ? createNullProvider() : undefined;
const t = await startTestStack(config.redisUrl, config.lanes, {
  sandboxDir: config.sandboxDir,
  heartbeatIntervalMs: config.heartbeatIntervalMs,
  parts: config.parts,
  ...(nullProvider ? { wrap: () => nullProvider } : {}),
});
const reply = (r: StackProcessReply, then: () => void = () => undefined) => process.send?.(r, then);
let stopping: Promise<void> | undefined;
const stop = () => (stopping ??= t.stop());
process.on('message', (m: StackProcessRequest) => {
  void (async () => {
    try {
      switch (m.op) {
        case 'rss': {
          const mem = process.memoryUsage();
          return reply({ id: m.id, rssBytes: mem.rss, heapUsedBytes: mem.heapUsed });
        }
        case 'sweep': {
          const supervisor = t.stack.supervisor;
          if (!supervisor) throw new Error('no supervisor in this process');
          const sweepMs: number[] = [];
          for (let i = 0; i < m.n; i++) {
            const t0 = performance.now();
            await supervisor.sweep();
            sweepMs.push(performance.now() - t0);
          }
          return reply({ id: m.id, sweepMs });
        }
        case 'stop':
          await stop();
          reply({ id: m.id }, () => process.exit(0));
          return;
      }
    } catch (err) {
      reply({ id: m.id, error: String(err) });
    }
  })();
});
/**
 * The bench gone without a stop took its Redis with it (the harness's redis-server ends with its
 * parent), and a stop hands cards back through Redis: it would wait for it forever. So it gets this long.
 */
const ORPHAN_STOP_DEADLINE_MS = 5_000;
// The bench gone (its IPC channel closed) without a stop: stop anyway, so nothing outlives it.
process.once('disconnect', () => {
  setTimeout(() => process.exit(1), ORPHAN_STOP_DEADLINE_MS).unref();
  void stop().finally(() => process.exit(0));
});
process.send?.({ ready: true, url: t.stack.url, pid: process.pid } satisfies StackProcessReady);
