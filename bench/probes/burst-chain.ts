import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
// The modules the stack loads under --conditions=@lanes/source: their prototypes are the ones wrapped.
import { InitChannel } from '../../libs/sandbox/src/local/init-channel.js';
import { LocalSandboxProvider } from '../../libs/sandbox/src/local/local-provider.js';
import { startRedis, startTestStack, waitFor } from '../../test/harness/index.js';
import { traceRedisCommands } from '../support/redis-trace.js';
import { settleAtZero } from '../support/burst-lane.js';
import { makeStampAgent } from '../support/stamp-agent.js';

const { values } = parseArgs({
  options: {
    'max-slots': { type: 'string', default: '2' },
    cards: { type: 'string', default: '200' },
    rounds: { type: 'string', default: '3' },
    all: { type: 'boolean', default: false },
  },
});
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const ROUNDS = Number(values.rounds);
const wallMs = () => performance.timeOrigin + performance.now();

type Step = { at: number; what: string; sandbox?: string };
let steps: Step[] | undefined;
const note = (what: string, sandbox?: string) => steps?.push({ at: wallMs(), what, ...(sandbox ? { sandbox } : {}) });

let own: unknown;
traceRedisCommands(
  (name, _args, answered) => {
    if (!steps) return;
    note(`redis ${name} sent`);
    answered.then(
      () => note(`redis ${name} answered`),
      () => undefined,
    );
  },
  () => own,
);
/** Which sandbox an init channel speaks to, set when its create resolves. */
const channelSandbox = new WeakMap<object, string>();
type Requesting = { request: (r: { op: string; argv?: string[] }, on: (e: { t: string }) => void) => number };
const request = (InitChannel.prototype as unknown as Requesting).request;
(InitChannel.prototype as unknown as Requesting).request = function (this: Requesting & object, r, on) {
  const what = r.op === 'exec' ? `exec ${r.argv?.[0] === 'echo' ? 'canary' : 'agent'}` : r.op;
  note(`${what} sent`, channelSandbox.get(this));
  return request.call(this, r, (e) => {
    if (e.t === 'exit' || e.t === 'started') note(`${what} ${e.t}`, channelSandbox.get(this));
    on(e);
  });
};
const create = LocalSandboxProvider.prototype.create;
LocalSandboxProvider.prototype.create = async function (...args: Parameters<typeof create>) {
  const started = wallMs();
  const handle = await create.apply(this, args);
  steps?.push({ at: started, what: 'create called', sandbox: handle.workdir }, { at: wallMs(), what: 'create done', sandbox: handle.workdir });
  channelSandbox.set((handle as unknown as { params: { channel: object } }).params.channel, handle.workdir);
  return handle;
};

const redis = await startRedis();
const conn = new Redis(redis.url);
own = conn;
const stamps = makeStampAgent('lanes-probe-burst-chain-', 3_000);
const { dir, agent } = stamps;
try {
  for (let r = 0; r < ROUNDS; r++) {
    const lane = `chain-${r}`;
    const t = await startTestStack(redis.url, [{ name: lane, slots: N, minSlots: 0, maxSlots: N, agent: ['bash', agent], idleReleaseMs: 200, killGraceMs: 100 }], {
      sandboxDir: join(dir, `stack-${r}`),
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
    });
    try {
      await settleAtZero(t.api);
      const offset = stamps.offset();
      const log: Step[] = [];
      steps = log;
      const t0 = wallMs();
      const res = await t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `c${r}-${i}`, lane, title: 'burst' })) });
      note(`POST answered ${res.status}`);
      const first = await waitFor(
        `${N} sandboxes running agents`,
        async () => {
          const bySandbox = stamps.firstBySandbox(offset);
          return bySandbox.size >= N ? bySandbox : undefined;
        },
        { intervalMs: 3, timeoutMs: 60_000 },
      );
      steps = undefined;
      const last = Math.max(...[...first.values()].map((x) => x.at));
      const at = (x: number | undefined) => (x === undefined ? '–' : `${(x - t0).toFixed(1)}`);
      const firstOf = (what: string, sandbox?: string) => log.find((s) => s.what === what && (sandbox === undefined || s.sandbox === sandbox))?.at;
      if (r < ROUNDS - 1) {
        console.error(`round ${r + 1}/${ROUNDS}: last agent ${(last - t0).toFixed(1)} ms (warm-up)`);
        continue;
      }
      console.log(`\nburst chain (${N} slots, ${CARDS} cards in one POST; round ${r + 1} of ${ROUNDS}, the stack in this process): last agent at ${(last - t0).toFixed(1)} ms\n`);
      console.log(
        `POST: enqueue script sent ${at(firstOf('redis lanesEnqueue sent'))}, answered ${at(firstOf('redis lanesEnqueue answered'))}; the worker's first fetch sent ${at(firstOf('redis moveToActive:6.7.0 sent'))}; POST answered ${at(firstOf(`POST answered ${res.status}`))} ms\n`,
      );
      console.log('| sandbox | create called | create done | canary sent | canary exit | agent exec sent | agent stamp |');
      console.log('|---|---|---|---|---|---|---|');
      [...first].forEach(([sandbox, { at: stamp }], i) => {
        const s = (what: string) => at(firstOf(what, sandbox));
        console.log(`| ${i + 1} | ${s('create called')} | ${s('create done')} | ${s('exec canary sent')} | ${s('exec canary exit')} | ${s('exec agent sent')} | ${at(stamp)} |`);
      });
      if (values.all)
        for (const s of log.filter((x) => x.at <= last).sort((a, b) => a.at - b.at))
          console.log(`${at(s.at).padStart(8)}  ${s.what}${s.sandbox ? ` ${s.sandbox.split('/').at(-2)}` : ''}`);
    } finally {
      await t.stop();
    }
  }
} finally {
  conn.disconnect();
  await redis.stop();
  stamps.remove();
}
