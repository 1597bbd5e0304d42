/**
 * What a sandbox's start costs the box in a burst: the CPU its process tree (unshare, sh, the Node
 * init and their threads) has run when its create resolves (the init's first pong), for the
 * sandboxes of a lanes burst and for the provider alone making as many, alternated round by round.
 * Both sides start the same inits; where lanes' creates take longer on a box its burst saturates,
 * this says whether the inits did more work or waited for a CPU.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/init-cpu.ts [--max-slots N] [--cards C] [--rounds R]   # defaults 2, 200, 6
 *
 * Lanes: a stack in this process with one lane at zero sandboxes (`minSlots: 0`), C cards in one
 * POST, until N sandboxes run agents (as probes/burst-chain.ts). Provider: burst.ts's warm baseline
 * (support/burst-provider.ts), one provider kept across the rounds in this process.
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import { LocalSandboxProvider } from '../../libs/sandbox/src/local/local-provider.js';
import { childrenOf } from '../../libs/sandbox/src/proc.js';
import { startRedis, startTestStack } from '../../test/harness/index.js';
import { providerRound, warmProvider } from '../support/burst-provider.js';
import { nthSandboxAt, settleAtZero } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';
import { threadCpuMs } from '../support/thread-cpu.js';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '2' }, cards: { type: 'string', default: '200' }, rounds: { type: 'string', default: '6' } } });
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);

/** Every process below `pid`: a sandbox's root is `unshare`, whose child is the namespace's sh, whose child is the init. */
function treeOf(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) tree.push(...childrenOf(tree[i]!));
  return tree;
}

/** The CPU a tree has run, in ms; a process that ended meanwhile took its time with it. */
function treeCpuMs(pid: number): number {
  let ms = 0;
  for (const p of treeOf(pid)) {
    try {
      ms += threadCpuMs(p);
    } catch (err) {
      const code = (err as NodeJS.ErrnoException).code;
      if (code !== 'ENOENT' && code !== 'ESRCH') throw err;
    }
  }
  return ms;
}

/** Where the creates of the side being timed put their readings. */
let readings: number[] | undefined;
const create = LocalSandboxProvider.prototype.create;
LocalSandboxProvider.prototype.create = async function (...args: Parameters<typeof create>) {
  const handle = await create.apply(this, args);
  if (readings && handle.pid !== undefined) readings.push(treeCpuMs(handle.pid));
  return handle;
};

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-init-cpu-', 3_000);
const provider = warmProvider(stamps);
const sides = { lanes: [] as number[], provider: [] as number[] };
const roundMs = { lanes: [] as number[], provider: [] as number[] };

async function lanesRound(r: number): Promise<number> {
  const lane = `init-cpu-${r}`;
  const t = await startTestStack(redis.url, [{ name: lane, slots: N, minSlots: 0, maxSlots: N, agent: ['bash', stamps.agent], idleReleaseMs: 200, killGraceMs: 100 }], {
    sandboxDir: join(stamps.dir, `stack-${r}`),
    heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
  });
  try {
    await settleAtZero(t.api);
    const offset = stamps.offset();
    readings = sides.lanes;
    const t0 = performance.timeOrigin + performance.now();
    const res = await t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `c${r}-${i}`, lane, title: 'burst' })) });
    if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
    const last = await nthSandboxAt(stamps, offset, N, `c${r}-`);
    return last - t0;
  } finally {
    readings = undefined;
    await t.stop();
  }
}

try {
  await providerRound(stamps, N, -1, provider);
  for (let r = 0; r < ROUNDS; r++) {
    roundMs.lanes.push(await lanesRound(r));
    readings = sides.provider;
    roundMs.provider.push(await providerRound(stamps, N, r, provider));
    readings = undefined;
    console.error(`round ${r + 1}/${ROUNDS}: lanes ${roundMs.lanes.at(-1)!.toFixed(0)} ms, provider ${roundMs.provider.at(-1)!.toFixed(0)} ms`);
  }
  const line = (side: 'lanes' | 'provider') =>
    `| ${side === 'lanes' ? 'a lanes burst (the stack in this process)' : 'the provider alone'} | ${median(roundMs[side]).toFixed(0)} ms | ${median(sides[side]).toFixed(1)} ms (${sides[side].map((x) => x.toFixed(0)).join(', ')}) |`;
  console.log(`\ninit CPU (${N} slots, ${CARDS} cards in one POST, ${ROUNDS} rounds alternated; node ${process.version})\n`);
  console.log('| side | to the last agent, median | CPU of one sandbox tree at its first pong, median (each) |');
  console.log('|---|---|---|');
  console.log(line('lanes'));
  console.log(line('provider'));
} finally {
  await provider.close();
  await redis.stop();
  stamps.remove();
}
