/**
 * What lanes alone adds to a burst, whatever the box's process starts cost: burst.ts's lanes round
 * (a fresh stack, a `minSlots: 0` lane at zero sandboxes, C cards in one POST) over the bench-only
 * null provider, whose sandboxes and execs cost nothing, so no process is forked. The agent's exec
 * is held open (the card keeps its slot), and the round ends when N agents' execs have been called.
 * Prints, per round and as medians, the time from the POST to the first and the N-th agent exec, the
 * POST's answer, and the CPU this process (the stack and the probe's one POST) and its redis-server
 * ran meanwhile. burst.ts's gap over the provider alone, less this, is what the local provider's
 * host-side work and the canary's process cost on that box.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-null.ts [--rounds R] [--max-slots N] [--cards C]
 */
import { loadavg } from 'node:os';
import { parseArgs } from 'node:util';
import { defaults } from '@lanes/contracts';
import type { SandboxHandle, SandboxProvider } from '@lanes/sandbox';
import { startRedis, startTestStack } from '../../test/harness/index.js';
import { settleAtZero } from '../support/burst-lane.js';
import { createNullProvider } from '../support/null-provider.js';
import { median } from '../support/stats.js';
import { threadCpuMs } from '../support/thread-cpu.js';

const { values } = parseArgs({
  options: { rounds: { type: 'string', default: '6' }, 'max-slots': { type: 'string', default: '8' }, cards: { type: 'string', default: '200' } },
});
const ROUNDS = Number(values.rounds);
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
/** Longer than any round: the held agents end only when the stack stops. */
const AGENT_HOLD_MS = 60_000;
/** A round whose N agents have not all started by then has found a fault, not a figure. */
const ROUND_DEADLINE_MS = 20_000;

/** The null provider, with every exec but the canary's `echo` held open and its call reported. */
function holdingProvider(onAgent: () => void): SandboxProvider {
  const inner = createNullProvider();
  const hold = (handle: SandboxHandle): SandboxHandle => ({
    ...handle,
    exec: async (argv, options) => {
      if (argv[0] === 'echo') return handle.exec(argv, options);
      onAgent();
      // Held until the stack's stop cancels it, as a local agent's exec ends on its cancel.
      const cancelled = await new Promise<boolean>((resolve) => {
        const timer = setTimeout(() => resolve(false), AGENT_HOLD_MS);
        options?.signal?.addEventListener('abort', () => {
          clearTimeout(timer);
          resolve(true);
        });
      });
      return cancelled ? { exitCode: 130, stdout: '', stderr: '', timedOut: false, cancelled: true, durationMs: 0 } : handle.exec(argv, options);
    },
  });
  return {
    name: inner.name,
    create: async (spec, options) => hold(await inner.create(spec, options)),
    list: (tags) => inner.list(tags),
    terminateById: (id) => inner.terminateById(id),
    close: () => inner.close(),
  };
}

const redis = await startRedis();
const rounds: Array<{ firstMs: number; lastMs: number; postMs: number; cpuMs: number; redisCpuMs: number }> = [];
try {
  for (let r = 0; r < ROUNDS; r++) {
    const lane = `null-burst-${r}`;
    const agentAt: number[] = [];
    let t0 = 0;
    let allRunning!: () => void;
    const running = new Promise<void>((resolve) => (allRunning = resolve));
    const t = await startTestStack(redis.url, [{ name: lane, slots: N, minSlots: 0, maxSlots: N, agent: ['agent'], idleReleaseMs: 200, killGraceMs: 100 }], {
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
      wrap: () =>
        holdingProvider(() => {
          agentAt.push(performance.now() - t0);
          if (agentAt.length === N) allRunning();
        }),
    });
    try {
      await settleAtZero(t.api);
      const before = { self: threadCpuMs(process.pid), redis: threadCpuMs(redis.pid!) };
      t0 = performance.now();
      const res = await t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `n${r}-${i}`, lane, title: 'burst' })) });
      if (res.status !== 202) throw new Error(`POST /v1/cards: ${res.status} ${res.text}`);
      const postMs = performance.now() - t0;
      await Promise.race([
        running,
        new Promise((_, reject) =>
          setTimeout(() => reject(new Error(`round ${r + 1}: ${agentAt.length} of ${N} agents started after ${ROUND_DEADLINE_MS} ms`)), ROUND_DEADLINE_MS).unref(),
        ),
      ]);
      rounds.push({ firstMs: agentAt[0]!, lastMs: agentAt[N - 1]!, postMs, cpuMs: threadCpuMs(process.pid) - before.self, redisCpuMs: threadCpuMs(redis.pid!) - before.redis });
      const x = rounds.at(-1)!;
      console.error(
        `round ${r + 1}/${ROUNDS}: POST answered ${x.postMs.toFixed(1)} ms; agent execs ${x.firstMs.toFixed(1)} → ${x.lastMs.toFixed(1)} ms; CPU ${x.cpuMs.toFixed(1)} ms, redis ${x.redisCpuMs.toFixed(1)} ms`,
      );
    } finally {
      await t.stop();
    }
  }
  const m = (k: keyof (typeof rounds)[number]) => median(rounds.map((x) => x[k])).toFixed(1);
  console.log(
    `\nburst on the null provider (${N} slots, ${CARDS} cards in one POST, ${ROUNDS} fresh stacks in this process; load ${loadavg()
      .map((l) => l.toFixed(2))
      .join(
        ' ',
      )}): medians: POST answered ${m('postMs')} ms, first agent exec ${m('firstMs')} ms, the last of ${N} ${m('lastMs')} ms; CPU of this process ${m('cpuMs')} ms, of its redis-server ${m('redisCpuMs')} ms`,
  );
} finally {
  await redis.stop();
}
