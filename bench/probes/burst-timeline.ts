/**
 * Where a burst's time goes on a lane that idles at zero sandboxes: one round as bench/burst.ts runs
 * it (a fresh stack in a process of its own, `minSlots: 0`, a burst of cards in one POST), then the
 * lane's events from Redis (slots added, sandboxes starting and live, cards running) and the agents'
 * stamps, as offsets from the POST; then the CPU the stack process, its redis-server and the whole
 * box spent from the POST until the N-th sandbox's agent ran (what the sandboxes' starts compete with).
 *
 *   npx tsx --conditions=@lanes/source bench/probes/burst-timeline.ts [--max-slots N] [--cards C]
 */
import { readFileSync } from 'node:fs';
import { Agent } from 'node:http';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { Redis } from 'ioredis';
import { defaults } from '@lanes/contracts';
import { keys } from '@lanes/queue';
import { apiClient, startRedis, waitFor } from '../../test/harness/index.js';
import { boxCpuMs } from '../support/box-cpu.js';
import { postJson } from '../support/enqueue-client.js';
import { startStackProcess } from '../support/stack-client.js';
import { makeStampAgent } from '../support/stamp-agent.js';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '8' }, cards: { type: 'string', default: '200' } } });
const N = Number(values['max-slots']);
const CARDS = Number(values.cards);
const wallMs = () => performance.timeOrigin + performance.now();
/** Linux's USER_HZ: /proc's CPU times count hundredths of a second. */
const MS_PER_TICK = 10;
/** A process's user + system CPU so far (/proc/<pid>/stat fields 14 and 15), in ms. */
const processCpuMs = (pid: number) => {
  const stat = readFileSync(`/proc/${pid}/stat`, 'latin1');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(fields[11]) + Number(fields[12])) * MS_PER_TICK;
};
const redis = await startRedis();
const conn = new Redis(redis.url);
const stamps = makeStampAgent('lanes-probe-burst-', 3_000);
const { dir, agent } = stamps;
const http = new Agent({ keepAlive: true });
try {
  const stack = await startStackProcess({
    redisUrl: redis.url,
    lanes: [{ name: 'burst', slots: N, minSlots: 0, maxSlots: N, agent: ['bash', agent], idleReleaseMs: 200, killGraceMs: 100 }],
    parts: { api: true, worker: true, supervisor: true },
    provider: 'local',
    heartbeatIntervalMs: defaults.DEFAULT_HEARTBEAT_INTERVAL_MS,
    sandboxDir: join(dir, 'stack'),
  });
  try {
    const api = apiClient(stack.url!);
    await waitFor('zero live', async () => ((await api.lanes())[0]?.slots ?? []).every((s) => s.sandbox?.state !== 'live') || undefined, { intervalMs: 50, timeoutMs: 30_000 });
    await new Promise((r) => setTimeout(r, defaults.DEFAULT_SLOT_SCALE_COOLDOWN_MS + 500));
    const eventsFrom = `${Date.now()}-0`;
    const cpu0 = { stack: processCpuMs(stack.pid), redis: processCpuMs(redis.pid!), box: boxCpuMs() };
    const t0 = wallMs();
    const res = await postJson(http, stack.url!, '/v1/cards', { cards: Array.from({ length: CARDS }, (_, i) => ({ id: `c-${i}`, lane: 'burst', title: 'burst' })) });
    const posted = wallMs() - t0;
    await waitFor(`${N} sandboxes running agents`, () => stamps.firstBySandbox(0).size >= N || undefined, { intervalMs: 5, timeoutMs: 30_000 });
    const allRunningMs = wallMs() - t0;
    const cpu1 = { stack: processCpuMs(stack.pid), redis: processCpuMs(redis.pid!), box: boxCpuMs() };
    // The events' tail (cards running after the N-th agent) lands after it.
    await new Promise((r) => setTimeout(r, 1_500));
    const rows: Array<[number, string]> = [[posted, `POST answered ${res.status}`]];
    for (const [, fields] of (await conn.xrange(keys.events(), eventsFrom, '+')) as Array<[string, string[]]>) {
      const e = JSON.parse(fields[fields.indexOf('e') + 1] ?? '{}') as { type?: string; at?: string; slot?: string; sandboxId?: string; cardId?: string; state?: string };
      if (e.at && e.type !== 'card.queued') rows.push([Date.parse(e.at) - t0, `${e.type ?? '?'} ${e.state ?? ''} ${e.slot ?? ''} ${e.cardId ?? ''}`]);
    }
    let nth = 0;
    for (const { id, at } of stamps.firstBySandbox(0).values()) rows.push([at - t0, `AGENT ${id} in a new sandbox (${++nth})`]);
    for (const [at, what] of rows.sort((a, b) => a[0] - b[0]).slice(0, 60)) console.log(`${at.toFixed(1).padStart(8)} ms  ${what}`);
    console.log(
      `\nCPU from the POST to the ${N}th agent (${allRunningMs.toFixed(0)} ms): the stack process ${cpu1.stack - cpu0.stack} ms (resident ${readFileSync(`/proc/${stack.pid}/status`, 'latin1').match(/VmRSS:\s*(\d+)/)?.[1]} kB), its redis-server ${cpu1.redis - cpu0.redis} ms, the box ${cpu1.box.busy - cpu0.box.busy} of ${cpu1.box.total - cpu0.box.total} ms (USER_HZ ticks)`,
    );
  } finally {
    await stack.stop();
  }
} finally {
  http.destroy();
  conn.disconnect();
  await redis.stop();
  stamps.remove();
}
