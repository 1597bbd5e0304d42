/**
 * What a burst costs the stack, round by round: burst.ts's lanes side (a fresh stack, a lane at zero
 * sandboxes, C cards in one POST) with the CPU the stack process (every thread) and its
 * redis-server ran from the POST to the N-th sandbox's first agent stamp, read from
 * /proc/<pid>/task/<tid>/schedstat (nanoseconds, where /proc's stat counts 10 ms ticks). Prints the
 * medians; with `--warm` each stack first runs 2N quick cards on a second lane and lets their
 * sandboxes go, so the burst meets code that has already run once (what first use costs).
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-cpu.ts [--rounds R] [--max-slots N] [--cards C] [--warm]
 */
import { readFileSync, readdirSync } from 'node:fs';
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import { apiClient, startRedis, waitFor } from '../../test/harness/index.js';
import { nthSandboxAt } from '../support/burst-lane.js';
import { postJson } from '../support/enqueue-client.js';
import { startStackProcess } from '../support/stack-client.js';
import { makeStampAgent } from '../support/stamp-agent.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'max-slots': { type: 'string', default: '8' },
    cards: { type: 'string', default: '200' },
    warm: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(values.rounds);
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const NS_PER_MS = 1e6;

const wallMs = () => performance.timeOrigin + performance.now();
/** CPU time every thread of `pid` has run so far (schedstat's first field), in ms. */
const cpuMs = (pid: number) =>
  readdirSync(`/proc/${pid}/task`).reduce((sum, tid) => sum + Number(readFileSync(`/proc/${pid}/task/${tid}/schedstat`, 'latin1').split(' ')[0]), 0) / NS_PER_MS;
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-burst-cpu-', 3_000);
const { dir, agent } = stamps;

const http = new Agent({ keepAlive: true });
const rounds: Array<{ lastAgentMs: number; postMs: number; stackCpuMs: number; redisCpuMs: number }> = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    const lane = { slots: N, minSlots: 0, maxSlots: N, idleReleaseMs: 200, killGraceMs: 100 };
    const stack = await startStackProcess({
      redisUrl: redis.url,
      lanes: [
        { name: `burst-${r}`, agent: ['bash', agent], ...lane },
        { name: `warm-${r}`, agent: ['true'], ...lane },
      ],
      parts: { api: true, worker: true, supervisor: true },
      provider: 'local',
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
      sandboxDir: join(dir, `stack-${r}`),
    });
    try {
      const api = apiClient(stack.url!);
      if (values.warm) {
        const warm = Array.from({ length: 2 * N }, (_, i) => ({ id: `w${r}-${i}`, lane: `warm-${r}`, title: 'warm' }));
        await postJson(http, stack.url!, '/v1/cards', { cards: warm });
        for (const { id } of warm) await waitFor(`${id} done`, async () => (await api.card(id)).state === 'done' || undefined, { intervalMs: 50, timeoutMs: 60_000 });
      }
      await waitFor('no live sandbox', async () => (await api.lanes()).flatMap((l) => l.slots).every((s) => s.sandbox?.state !== 'live') || undefined, {
        intervalMs: 50,
        timeoutMs: 60_000,
      });
      await new Promise((resolve) => setTimeout(resolve, defaults.DEFAULT_SLOT_SCALE_COOLDOWN_MS + 500));
      const offset = stamps.offset();
      const before = { stack: cpuMs(stack.pid), redis: cpuMs(redis.pid!) };
      const t0 = wallMs();
      const cards = Array.from({ length: CARDS }, (_, i) => ({ id: `b${r}-${i}`, lane: `burst-${r}`, title: 'burst' }));
      const res = await postJson(http, stack.url!, '/v1/cards', { cards });
      const postMs = wallMs() - t0;
      if (res.status >= 300) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const last = await nthSandboxAt(stamps, offset, N, `b${r}-`);
      rounds.push({ lastAgentMs: last - t0, postMs, stackCpuMs: cpuMs(stack.pid) - before.stack, redisCpuMs: cpuMs(redis.pid!) - before.redis });
      const x = rounds.at(-1)!;
      console.error(
        `round ${r + 1}/${ROUNDS}: last agent ${x.lastAgentMs.toFixed(0)} ms, POST ${x.postMs.toFixed(1)} ms, stack CPU ${x.stackCpuMs.toFixed(1)} ms, redis CPU ${x.redisCpuMs.toFixed(1)} ms`,
      );
    } finally {
      await stack.stop();
    }
  }
  const m = (k: keyof (typeof rounds)[number]) => median(rounds.map((x) => x[k])).toFixed(1);
  console.log(
    `\nburst CPU (${values.warm ? 'warm' : 'fresh'} stacks, ${N} slots, ${CARDS} cards, ${ROUNDS} rounds; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}): medians: last agent ${m('lastAgentMs')} ms, POST ${m('postMs')} ms, stack CPU ${m('stackCpuMs')} ms, redis CPU ${m('redisCpuMs')} ms`,
  );
} finally {
  http.destroy();
  await redis.stop();
  stamps.remove();
}
