/**
 * What a second canary would cost a new Modal sandbox: on the local Modal server (real SDK), a
 * create (which runs the connect canary itself) beside the slot's nonce canary run right after it,
 * through the command wrapper cards use. A slot runs that second canary only after a file sync
 * (`passedCanaryAtCreate`, apps/worker/src/slot.ts), so this is what every other create saves.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/modal-canary.ts [--n N]   # default 12, the first 2 untimed
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { runCanary } from '@lanes/runner';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer } from '@lanes/sandbox/testing/modal-server';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { n: { type: 'string', default: '12' } } });
const N = Number(values.n);
const WARM_UP = 2;

const server = await startModalServer({});
const provider = new ModalProvider(server.client(), { appName: 'lanes-probe', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true });
const createMs: number[] = [];
const canaryMs: number[] = [];
try {
  for (let i = 0; i < N; i++) {
    const t0 = performance.now();
    const handle = await provider.create({ image: 'debian:bookworm-slim', tags: { lane: 'probe', slot: 's1', worker: `w-${process.pid}` } });
    const t1 = performance.now();
    const reading = await runCanary(handle, { newNonce: () => `lanes-canary-probe-${i}`, canaryTimeoutMs: 5_000 });
    const t2 = performance.now();
    await handle.terminate();
    if (reading.finding.kind !== 'polled' || reading.finding.canary !== 'answered') throw new Error(`canary ${i}: ${reading.reason}`);
    if (i < WARM_UP) continue;
    createMs.push(t1 - t0);
    canaryMs.push(t2 - t1);
  }
} finally {
  await provider.close();
  await server.close();
}
console.log(`\nmodal canary (local Modal server, real SDK; medians of ${createMs.length}, after ${WARM_UP} untimed; node ${process.version})\n`);
console.log('| step | median | ÷ create |');
console.log('|---|---|---|');
console.log(`| create, its connect canary included | ${median(createMs).toFixed(1)} ms | 1.00× |`);
console.log(`| a slot canary after it (\`echo <nonce>\` through the wrapper) | ${median(canaryMs).toFixed(1)} ms | ${(median(canaryMs) / median(createMs)).toFixed(2)}× |`);
