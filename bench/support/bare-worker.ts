/**
 * The throughput and first-instruction benches' baseline, in a process of its own: a bare BullMQ
 * `Worker` (concurrency given) that spawns a command per job (`true` unless given), nothing else;
 * the job's id reaches the command as LANES_CARD_ID, as a lanes agent's card id does. Its own process so that the lanes stack's heap
 * does not slow its spawns (fork copies the parent's page tables: in the bench's process the
 * baseline got slower round by round as the stack's heap grew) and its event loop is not shared.
 *
 *   npx tsx bench/support/bare-worker.ts <redis-url> <queue> <prefix> <concurrency> [command argv…]
 *
 * Prints `ready` once the worker listens; SIGTERM closes it and exits.
 */
import { spawn } from 'node:child_process';
import { Worker } from 'bullmq';
import { Redis } from 'ioredis';

const [url, queue, prefix, concurrency, ...argv] = process.argv.slice(2);
const [command = 'true', ...args] = argv;
/** A given command gets the card id and PATH only (as a lanes agent's allow-listed env); `true` inherits this process's env, as it always has. */
const envOf = (id: string | undefined) => (argv.length > 0 ? { PATH: process.env.PATH, LANES_CARD_ID: id } : process.env);
if (!url || !queue || !prefix || !concurrency) throw new Error('usage: bare-worker.ts <redis-url> <queue> <prefix> <concurrency>');
const connection = new Redis(url, { maxRetriesPerRequest: null });
const worker = new Worker(
  queue,
  (job) =>
    new Promise<void>((resolve, reject) => {
      const child = spawn(command, args, { stdio: 'ignore', env: envOf(job.id) });
      child.once('error', reject);
      child.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${command} exited ${code}`))));
    }),
  { connection, prefix, concurrency: Number(concurrency) },
);
// Its parent gone (a bench that died before it could stop it), it goes too: nothing outlives the run.
const parentPid = process.ppid;
setInterval(() => process.ppid !== parentPid && process.exit(0), 500).unref();
await worker.waitUntilReady();
process.stdout.write('ready\n');
process.once('SIGTERM', () => {
  void worker.close().then(() => {
    connection.disconnect();
    process.exit(0);
  });
});
