/**
 * What a burst costs the stack, round by round: burst.ts's lanes side (bench/support/burst-lane.ts:
 * a fresh stack, a lane at zero sandboxes, C cards in one POST) with the CPU the stack process
 * (every thread) and its redis-server ran from the POST to the N-th sandbox's first agent stamp,
 * read from /proc/<pid>/task/<tid>/schedstat (nanoseconds, where /proc's stat counts 10 ms ticks).
 * Prints the medians; with `--warm` each stack first runs 2N quick cards on a second lane and lets
 * their sandboxes go, so the burst meets code that has already run once (what first use costs).
 * `--threads` splits the stack's CPU by thread name (main thread, V8's helpers, libuv's pool; Node 22
 * and later name them, Node 20 calls every thread `node`).
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-cpu.ts [--rounds R] [--max-slots N] [--cards C] [--warm] [--threads]
 */
import { Agent } from 'node:http';
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { startRedis } from '../../test/harness/index.js';
import { burstLaneRound, defaultWarmCards } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';
import { threadCpuByName, threadCpuMs, totalCpuMs } from '../support/thread-cpu.js';

const { values } = parseArgs({
  options: {
    rounds: { type: 'string', default: '6' },
    'max-slots': { type: 'string', default: '8' },
    cards: { type: 'string', default: '200' },
    warm: { type: 'boolean', default: false },
    threads: { type: 'boolean', default: false },
  },
});
const ROUNDS = Number(values.rounds);
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);

const redis = await startRedis();
const stamps = makeStampAgent('lanes-probe-burst-cpu-', 3_000);

const http = new Agent({ keepAlive: true });
const rounds: Array<{ lastAgentMs: number; postMs: number; stackCpuMs: number; redisCpuMs: number }> = [];
/** The stack's CPU per thread name, one entry per round (printed with `--threads`). */
const byThread = new Map<string, number[]>();
try {
  for (let r = 0; r < ROUNDS; r++) {
    let before = { at: 0, stack: 0, redis: 0 };
    let threadsBefore = new Map<string, number>();
    let postMs = 0;
    let after = { stack: 0, redis: 0 };
    const lastAgentMs = await burstLaneRound({
      redisUrl: redis.url,
      stamps,
      http,
      round: r,
      slots: N,
      cards: CARDS,
      warmCards: values.warm ? defaultWarmCards(N) : 0,
      onMeasure: (phase, stackPid) => {
        if (phase === 'before') {
          threadsBefore = threadCpuByName(stackPid);
          before = { at: performance.now(), stack: totalCpuMs(threadsBefore), redis: threadCpuMs(redis.pid!) };
        } else if (phase === 'posted') postMs = performance.now() - before.at;
        else {
          const threads = threadCpuByName(stackPid);
          after = { stack: totalCpuMs(threads), redis: threadCpuMs(redis.pid!) };
          for (const [name, ms] of threads) byThread.set(name, [...(byThread.get(name) ?? []), ms - (threadsBefore.get(name) ?? 0)]);
        }
      },
    });
    rounds.push({ lastAgentMs, postMs, stackCpuMs: after.stack - before.stack, redisCpuMs: after.redis - before.redis });
    const x = rounds.at(-1)!;
    console.error(
      `round ${r + 1}/${ROUNDS}: last agent ${x.lastAgentMs.toFixed(0)} ms, POST ${x.postMs.toFixed(1)} ms, stack CPU ${x.stackCpuMs.toFixed(1)} ms, redis CPU ${x.redisCpuMs.toFixed(1)} ms`,
    );
  }
  const m = (k: keyof (typeof rounds)[number]) => median(rounds.map((x) => x[k])).toFixed(1);
  console.log(
    `\nburst CPU (${values.warm ? 'warm' : 'fresh'} stacks, ${N} slots, ${CARDS} cards, ${ROUNDS} rounds; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(' ')}): medians: last agent ${m('lastAgentMs')} ms, POST ${m('postMs')} ms, stack CPU ${m('stackCpuMs')} ms, redis CPU ${m('redisCpuMs')} ms`,
  );
  const threads = values.threads ? [...byThread].filter(([, ms]) => median(ms) >= 0.05).sort((x, y) => median(y[1]) - median(x[1])) : [];
  for (const [name, ms] of threads) console.log(`  stack CPU on ${name}: median ${median(ms).toFixed(1)} ms (${ms.map((v) => v.toFixed(1)).join(', ')})`);
} finally {
  http.destroy();
  await redis.stop();
  stamps.remove();
}
