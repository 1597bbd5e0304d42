/**
 * The POST of 100 cards beside the same POST to another checkout's API (a worktree of an older
 * commit), so a change to the enqueue path is measured against what it replaced in one run: each
 * checkout's `lanes api` in a process of its own on one redis-server, each on a lane of its own,
 * posted to alternately (the order swapped every round) by one keep-alive client.
 *
 *   git worktree add /tmp/lanes-old <commit> && (cd /tmp/lanes-old && npm ci)
 *   npx tsx --conditions=@lanes/source bench/probes/enqueue-beside.ts --other /tmp/lanes-old [--rounds R]
 *
 * Prints the median latency of each and their ratio (this checkout / the other).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { Agent, request } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { PROJECT_DIR } from '@lanes/cli';
import { freePort, startRedis, waitFor } from '../../test/harness/index.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { other: { type: 'string' }, rounds: { type: 'string', default: '600' }, warmup: { type: 'string', default: '100' } } });
if (!values.other) throw new Error('--other DIR: the checkout to measure beside this one');
const ROUNDS = Number(values.rounds);
const WARMUP_ROUNDS = Number(values.warmup);
const BULK = 100;

const redis = await startRedis();
const dir = mkdtempSync(join(tmpdir(), 'lanes-enqueue-beside-'));
const agent = new Agent({ keepAlive: true, maxSockets: 2 });
const children: ChildProcess[] = [];

async function startApi(tree: string, lane: string): Promise<{ port: number; lane: string; ms: number[] }> {
  const port = await freePort();
  const config = join(dir, `${lane}.json`);
  writeFileSync(config, JSON.stringify({ lanes: [{ name: lane, slots: 1, agent: ['true'] }] }));
  const env = { ...process.env, REDIS_URL: redis.url, LANES_CONFIG: config, LANES_PORT: String(port), LANES_HOST: '127.0.0.1', LANES_LOG_LEVEL: 'silent' };
  children.push(spawn(process.execPath, [join(tree, 'apps/cli/bin/lanes.js'), 'api'], { cwd: tree, env, stdio: ['ignore', 'ignore', 'inherit'] }));
  await waitFor(`${tree}'s API`, async () => (await fetch(`http://127.0.0.1:${port}/healthz`).catch(() => undefined))?.ok === true, { timeoutMs: 60_000 });
  return { port, lane, ms: [] };
}

function post(port: number, body: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const headers = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) };
    const req = request({ host: '127.0.0.1', port, path: '/v1/cards', method: 'POST', agent, headers }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 202 ? resolve() : reject(new Error(`POST answered ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
}

try {
  const here = await startApi(PROJECT_DIR, 'here');
  const other = await startApi(values.other, 'other');
  for (let r = 0; r < WARMUP_ROUNDS + ROUNDS; r++) {
    for (const side of r % 2 ? [here, other] : [other, here]) {
      const body = JSON.stringify({ cards: Array.from({ length: BULK }, (_, k) => ({ id: `${side.lane}-${r}-${k}`, lane: side.lane, title: 'trivial' })) });
      const t0 = performance.now();
      await post(side.port, body);
      if (r >= WARMUP_ROUNDS) side.ms.push(performance.now() - t0);
    }
  }
  const [a, b] = [median(here.ms), median(other.ms)];
  console.log(`POST {cards:[${BULK}]}, median of ${ROUNDS} alternated rounds: this checkout ${a.toFixed(3)} ms, ${values.other} ${b.toFixed(3)} ms: ${(a / b).toFixed(3)}×`);
} finally {
  agent.destroy();
  for (const c of children) c.kill('SIGKILL');
  await redis.stop();
  rmSync(dir, { recursive: true, force: true });
}
