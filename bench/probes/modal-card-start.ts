/**
 * What a card's preparation costs on Modal before its agent starts: on the local Modal server (real
 * SDK), one live sandbox, `prepareCard` (the card's directories reset, its card file written) with
 * the write beside the reset, as lanes does it (`writeBesideReset`), alternated card by card with
 * the same handle seen without that flag, so the write waits for the reset as it did before.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/modal-card-start.ts [--cards N]   # default 12 a side, the first 2 untimed
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { CardSchema, LaneConfigSchema } from '@lanes/contracts';
import { prepareCard } from '@lanes/runner';
import type { SandboxHandle } from '@lanes/sandbox';
import { ModalProvider } from '@lanes/sandbox/modal';
import { startModalServer } from '@lanes/sandbox/testing/modal-server';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { cards: { type: 'string', default: '12' } } });
const CARDS = Number(values.cards);
const WARM_UP = 2;

/** The handle as a provider without the flag would give it: every call goes to the real one (its own `this`, for its private fields). */
function inSeries(handle: SandboxHandle): SandboxHandle {
  return new Proxy(handle, {
    get: (target, key) => {
      if (key === 'writeBesideReset') return false;
      const value: unknown = Reflect.get(target, key, target);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

const server = await startModalServer({});
const provider = new ModalProvider(server.client(), { appName: 'lanes-probe', workdir: join(server.rootDir, 'work'), livenessPollIntervalMs: 50, ownsClient: true });
const lane = LaneConfigSchema.parse({ name: 'probe', agent: ['true'] });
const ms = { beside: [] as number[], series: [] as number[] };
try {
  const handle = await provider.create({ image: 'debian:bookworm-slim', tags: { lane: 'probe', slot: 's1', worker: `w-${process.pid}` } });
  let previousCardId: string | undefined;
  for (let i = 0; i < 2 * (CARDS + WARM_UP); i++) {
    const side = i % 2 === 0 ? 'beside' : 'series';
    const card = CardSchema.parse({ id: `c-${i}`, lane: 'probe', title: 'prepare' });
    const t0 = performance.now();
    const stopped = await prepareCard(
      { handle: side === 'beside' ? handle : inSeries(handle), newNonce: () => `lanes-canary-probe-${i}`, canaryTimeoutMs: 5_000 },
      { card, lane, ...(previousCardId ? { previousCardId } : {}) },
    );
    const took = performance.now() - t0;
    if (stopped) throw new Error(`card ${card.id}: ${JSON.stringify(stopped)}`);
    previousCardId = card.id;
    if (i >= 2 * WARM_UP) ms[side].push(took);
  }
  await handle.terminate();
} finally {
  await provider.close();
  await server.close();
}
console.log(`\nmodal card start (local Modal server, real SDK; ${ms.beside.length} cards a side, alternated, after ${WARM_UP} untimed; node ${process.version})\n`);
console.log('| a card’s preparation (reset + card file) | median | ÷ in series |');
console.log('|---|---|---|');
console.log(`| the write beside the reset (lanes) | ${median(ms.beside).toFixed(1)} ms | ${(median(ms.beside) / median(ms.series)).toFixed(2)}× |`);
console.log(`| the write after the reset | ${median(ms.series).toFixed(1)} ms | 1.00× |`);
