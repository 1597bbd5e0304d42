/**
 * Where one idle card's time to its agent's first instruction goes: a timeline of every Redis
 * command the stack sends (sent → answered, scripts by name), the exec request to the sandbox init
 * and its `started` answer, from the POST to the agent's stamp. Cards go one at a time, as in
 * bench/first-instruction.ts's idle case; the median of each event's offset is printed.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/first-instruction-timeline.ts [--cards N]
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { keys } from '@lanes/queue';
// The same module the stack loads under --conditions=@lanes/source: its prototype is the one patched.
import { InitChannel } from '../../libs/sandbox/src/local/init-channel.js';
import { LocalSandbox } from '../../libs/sandbox/src/local/local-sandbox.js';
import { startRedis, startTestStack, waitFor } from '../../test/harness/index.js';
import { traceRedisCommands } from '../support/redis-trace.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { cards: { type: 'string', default: '100' } } });
const CARDS = Number(values.cards);
const wallMs = () => performance.timeOrigin + performance.now();

let events: Array<{ at: number; what: string }> | undefined;
let own: unknown;
traceRedisCommands(
  (name, _args, answered) => {
    const log = events;
    if (!log) return;
    log.push({ at: wallMs(), what: `${name} sent` });
    answered.then(
      () => log.push({ at: wallMs(), what: `${name} answered` }),
      () => undefined,
    );
  },
  () => own,
);
type Requesting = { request: (r: { op: string }, on: (e: { t: string }) => void) => number };
const request = (InitChannel.prototype as unknown as Requesting).request;
(InitChannel.prototype as unknown as Requesting).request = function (this: Requesting, r, on) {
  events?.push({ at: wallMs(), what: `init ${r.op} sent` });
  return request.call(this, r, (e) => {
    if (e.t === 'started' || e.t === 'exit') events?.push({ at: wallMs(), what: `init ${r.op} ${e.t}` });
    on(e);
  });
};

/** The sandbox's file work before the agent starts: when it is called and when it is done. */
type FileWork = Record<'resetDirs' | 'writeFile', (...args: unknown[]) => Promise<unknown>>;
for (const name of ['resetDirs', 'writeFile'] as const) {
  const original = (LocalSandbox.prototype as unknown as FileWork)[name];
  (LocalSandbox.prototype as unknown as FileWork)[name] = function (this: object, ...args: unknown[]) {
    events?.push({ at: wallMs(), what: `sandbox ${name} called` });
    const p = original.apply(this, args);
    events?.push({ at: wallMs(), what: `sandbox ${name} returned` });
    void p.finally(() => events?.push({ at: wallMs(), what: `sandbox ${name} done` }));
    return p;
  };
}

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-probe-first-'));
chmodSync(dir, 0o777);
const stampFile = join(dir, 'stamps');
writeFileSync(stampFile, '');
chmodSync(stampFile, 0o666);
const agent = join(dir, 'agent.sh');
writeFileSync(agent, `printf '%s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" >> ${stampFile}\n`);
chmodSync(agent, 0o755);
const conn = new Redis(redis.url);
own = conn;
try {
  const t = await startTestStack(redis.url, [{ name: 'first', slots: 4, agent: ['bash', agent] }], {
    sandboxDir: join(dir, 'stack'),
    heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
  });
  const offsets = new Map<string, number[]>();
  try {
    for (let i = 0; i < CARDS + 20; i++) {
      const id = `c-${i}`;
      const log: Array<{ at: number; what: string }> = [];
      events = log;
      const t0 = wallMs();
      const res = await t.api.request('POST', '/v1/cards', { id, lane: 'first', title: 'timeline' });
      log.push({ at: wallMs(), what: 'POST answered' });
      if (res.status >= 300) throw new Error(`POST: ${res.status}`);
      await waitFor('done', async () => (await conn.hget(keys.card(id), 'state')) === 'done' || undefined, { intervalMs: 5, timeoutMs: 20_000 });
      events = undefined;
      const stamp = readFileSync(stampFile, 'utf8')
        .split('\n')
        .find((l) => l.startsWith(`${id} `));
      const at = Number(stamp!.split(' ')[1]) * 1000;
      log.push({ at, what: 'AGENT STAMP' });
      if (i < 20) continue;
      // The nth occurrence of an event keeps its own row.
      const seen = new Map<string, number>();
      for (const e of log.filter((e) => e.at <= at)) {
        const k = seen.get(e.what) ?? 0;
        seen.set(e.what, k + 1);
        const key = k === 0 ? e.what : `${e.what} #${k + 1}`;
        offsets.set(key, [...(offsets.get(key) ?? []), e.at - t0]);
      }
    }
  } finally {
    await t.stop();
  }
  console.log('| event | cards | median offset from the POST |');
  console.log('|---|---|---|');
  for (const [what, xs] of [...offsets].sort((a, b) => median(a[1]) - median(b[1]))) {
    if (xs.length >= CARDS / 2) console.log(`| ${what} | ${xs.length} | ${median(xs).toFixed(2)} ms |`);
  }
} finally {
  conn.disconnect();
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
