/**
 * The sandbox's part of the time to an agent's first instruction: a local sandbox's exec of a bash
 * script whose first act stamps `$EPOCHREALTIME`, from the call to the stamp, beside a bare `spawn`
 * of the same script from this process (what bench/first-instruction.ts's baseline does), alternated.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/exec-first-instruction.ts [--n N] [--isolation pid-namespace|process-group]
 */
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalProvider, detectIsolation } from '@lanes/sandbox';
import { percentile as pct } from '../support/stats.js';

const { values } = parseArgs({ options: { n: { type: 'string', default: '200' }, isolation: { type: 'string' } } });
const N = Number(values.n);
const isolation = (values.isolation ?? detectIsolation()) as 'pid-namespace' | 'process-group';
const wallMs = () => performance.timeOrigin + performance.now();
const dir = mkdtempSync(join(tmpdir(), 'lanes-probe-exec-first-'));
chmodSync(dir, 0o777);
const stampFile = join(dir, 'stamps');
writeFileSync(stampFile, '');
chmodSync(stampFile, 0o666);
const agent = join(dir, 'agent.sh');
writeFileSync(agent, `printf '%s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" >> ${stampFile}\n`);
chmodSync(agent, 0o755);
const provider = createLocalProvider({ baseDir: join(dir, 'sandboxes'), isolation });
try {
  const h = await provider.create({ image: 'local', tags: { lane: 'probe', slot: '0', worker: 'probe' } });
  const sent = new Map<string, number>();
  const lanes: string[] = [];
  const bare: string[] = [];
  const viaSandbox = async (id: string) => {
    sent.set(id, wallMs());
    await h.exec(['bash', agent], { env: { LANES_CARD_ID: id } });
  };
  const viaSpawn = (id: string) =>
    new Promise<void>((resolve, reject) => {
      sent.set(id, wallMs());
      const child = spawn('bash', [agent], { stdio: 'ignore', env: { PATH: process.env.PATH, LANES_CARD_ID: id } });
      child.once('error', reject);
      child.once('exit', () => resolve());
    });
  for (let i = 0; i < 20; i++) {
    await viaSandbox(`warm-l-${i}`);
    await viaSpawn(`warm-b-${i}`);
  }
  for (let i = 0; i < N; i++) {
    const order = i % 2 === 0 ? ['l', 'b'] : ['b', 'l'];
    for (const side of order) {
      const id = `${side}-${i}`;
      if (side === 'l') {
        lanes.push(id);
        await viaSandbox(id);
      } else {
        bare.push(id);
        await viaSpawn(id);
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  }
  const stamps = new Map(
    readFileSync(stampFile, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => [l.split(' ')[0]!, Number(l.split(' ')[1]) * 1000] as const),
  );
  const ms = (ids: string[]) => ids.map((id) => stamps.get(id)! - sent.get(id)!);
  const l = ms(lanes);
  const b = ms(bare);
  console.log(`| ${isolation} (n = ${N}) | p50 | p99 |\n|---|---|---|`);
  console.log(`| sandbox exec → stamp | ${pct(l, 50).toFixed(2)} ms | ${pct(l, 99).toFixed(2)} ms |`);
  console.log(`| spawn → stamp | ${pct(b, 50).toFixed(2)} ms | ${pct(b, 99).toFixed(2)} ms |`);
  console.log(`| ratio | ${(pct(l, 50) / pct(b, 50)).toFixed(2)}× | ${(pct(l, 99) / pct(b, 99)).toFixed(2)}× |`);
  await h.terminate();
} finally {
  await provider.close();
  rmSync(dir, { recursive: true, force: true });
}
