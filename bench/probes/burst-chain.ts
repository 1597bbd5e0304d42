/**
 * The chain of steps between a burst's POST and each new sandbox's first agent, for a lane that
 * idles at zero sandboxes: the enqueue script, the worker's first fetch, and per sandbox the
 * provider's create, the canary (`echo <nonce>`), the card's agent exec and its stamp, as offsets
 * from the POST. Where burst.ts's ratio is mostly CPU at 8 slots on two cores, at 1–2 slots it is
 * this chain: what lanes adds before and after the provider's own create and exec.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-chain.ts [--max-slots N] [--cards C] [--rounds R] [--all]
 *   # defaults 2, 200, 3; each round a fresh stack; the last round is printed (--all: every Redis command too)
 *
 * The stack (API, worker, supervisor, as `lanes up` runs them in one process) runs in this process,
 * so that Redis commands, init requests and provider creates are timed by wrapping their prototypes,
 * as probes/first-instruction-timeline.ts does; earlier rounds warm the code.
 */
import { createHash } from 'node:crypto';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
// The modules the stack loads under --conditions=@lanes/source: their prototypes are the ones wrapped.
import { InitChannel } from '../../libs/sandbox/src/local/init-channel.js';
import { LocalSandboxProvider } from '../../libs/sandbox/src/local/local-provider.js';
import { startRedis, startTestStack, waitFor } from '../../test/harness/index.js';

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

/** Script names by sha, from every defineCommand. */
const scriptNames = new Map<string, string>();
type Definable = { defineCommand: (name: string, def: { lua: string }) => void };
const define = (Redis.prototype as unknown as Definable).defineCommand;
(Redis.prototype as unknown as Definable).defineCommand = function (this: Definable, name, def) {
  scriptNames.set(createHash('sha1').update(def.lua).digest('hex'), name);
  return define.call(this, name, def);
};
type Sendable = { sendCommand: (command: { name: string; args: unknown[]; promise: Promise<unknown> }, stream?: unknown) => unknown };
const sendCommand = (Redis.prototype as unknown as Sendable).sendCommand;
let own: unknown;
(Redis.prototype as unknown as Sendable).sendCommand = function (this: Sendable & object, command, stream) {
  if (steps && this !== own) {
    const name = command.name === 'evalsha' || command.name === 'eval' ? (scriptNames.get(String(command.args[0])) ?? command.name) : command.name;
    note(`redis ${name} sent`);
    command.promise.then(
      () => note(`redis ${name} answered`),
      () => undefined,
    );
  }
  return sendCommand.call(this, command, stream);
};
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
const dir = mkdtempSync(join(tmpdir(), 'lanes-probe-burst-chain-'));
chmodSync(dir, 0o777);
const stampFile = join(dir, 'stamps');
writeFileSync(stampFile, '');
chmodSync(stampFile, 0o666);
const agent = join(dir, 'agent.sh');
writeFileSync(agent, `printf '%s %s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" "$LANES_CARD_FILE" >> ${stampFile}\nsleep 3\n`);
chmodSync(agent, 0o755);
try {
  for (let r = 0; r < ROUNDS; r++) {
    const lane = `chain-${r}`;
    const t = await startTestStack(redis.url, [{ name: lane, slots: N, minSlots: 0, maxSlots: N, agent: ['bash', agent], idleReleaseMs: 200, killGraceMs: 100 }], {
      sandboxDir: join(dir, `stack-${r}`),
      heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
    });
    try {
      await waitFor(
        `${lane} at zero live sandboxes`,
        async () => {
          const body = JSON.parse((await t.api.request('GET', `/v1/lanes/${lane}`)).text) as { slots: Array<{ sandbox?: { state: string } }> };
          return body.slots.every((s) => s.sandbox?.state !== 'live') || undefined;
        },
        { intervalMs: 50, timeoutMs: 60_000 },
      );
      await new Promise((resolve) => setTimeout(resolve, defaults.DEFAULT_SLOT_SCALE_COOLDOWN_MS + 500));
      const offset = readFileSync(stampFile, 'utf8').length;
      const log: Step[] = [];
      steps = log;
      const t0 = wallMs();
      const res = await t.api.request('POST', '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `c${r}-${i}`, lane, title: 'burst' })) });
      note(`POST answered ${res.status}`);
      const stamps = await waitFor(
        `${N} sandboxes running agents`,
        async () => {
          const first = new Map<string, number>();
          for (const line of readFileSync(stampFile, 'utf8').slice(offset).split('\n').filter(Boolean)) {
            const [, at, file] = line.split(' ');
            const sandbox = file!.split('/cards/')[0]!;
            if (!first.has(sandbox)) first.set(sandbox, Number(at) * 1000);
          }
          return first.size >= N ? first : undefined;
        },
        { intervalMs: 3, timeoutMs: 60_000 },
      );
      steps = undefined;
      const last = Math.max(...stamps.values());
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
      const order = [...stamps].sort((a, b) => a[1] - b[1]);
      order.forEach(([sandbox, stamp], i) => {
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
  rmSync(dir, { recursive: true, force: true });
}
