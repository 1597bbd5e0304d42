/**
 * The throughput bench's baseline, in a process of its own: a bare BullMQ `Worker` (concurrency
 * given) that spawns `true` per job, nothing else. Its own process so that the lanes stack's heap
 * does not slow its spawns (fork copies the parent's page tables: in the bench's process the
 * baseline got slower round by round as the stack's heap grew) and its event loop is not shared.
 *
 *   npx tsx bench/bare-worker.ts <redis-url> <queue> <prefix> <concurrency>
 *
 * Prints `ready` once the worker listens; SIGTERM closes it and exits.
 */
import { spawn } from 'node:child_process';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url, queue, prefix, concurrency] = process.argv.slice(2);
if (!url || !queue || !prefix || !concurrency) throw new Error('usage: bare-worker.ts <redis-url> <queue> <prefix> <concurrency>');
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(
  queue,
  () =>
    new Promise<void>((resolve, reject) => {
      const child = spawn('true', [], { stdio: 'ignore' });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`true exited ${code}`))));
    }),
  { connection, prefix, concurrency: Number(concurrency) },
);
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void worker.close().then(() => {
    connection.disconnect();
    process.exit(0);
  });
});
