/**
 * What the canary a slot runs on every new sandbox costs a burst, on the provider alone: N local
 * sandboxes made at once, each running the agent (burst.ts's baseline), against the same with an
 * `echo <nonce>` exec between the create and the agent (what a slot does before a sandbox is live),
 * alternated round by round; the time until the N-th agent's first instruction, medians.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/provider-canary.ts [--max-slots N] [--rounds R]
 */
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalProvider, detectIsolation, type SandboxHandle } from '@lanes/sandbox';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '8' }, rounds: { type: 'string', default: '12' } } });
const N = Number(values['max-slots']);
const ROUNDS = Number(values.rounds);
const wallMs = () => performance.timeOrigin + performance.now();
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] ?? Number.NaN;

const dir = mkdtempSync(join(tmpdir(), 'lanes-probe-canary-'));
chmodSync(dir, 0o777);
const stampFile = join(dir, 'stamps');
writeFileSync(stampFile, '');
chmodSync(stampFile, 0o666);
const agent = join(dir, 'agent.sh');
writeFileSync(agent, `printf '%s %s\\n' "$LANES_CARD_ID" "$EPOCHREALTIME" >> ${stampFile}\nsleep 1\n`);
chmodSync(agent, 0o755);
const isolation = detectIsolation();

async function round(r: number, canary: boolean): Promise<number> {
  const provider = createLocalProvider({ baseDir: join(dir, `round-${r}`), isolation });
  const handles: SandboxHandle[] = [];
  try {
    const t0 = wallMs();
    await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const h = await provider.create({ image: 'local', tags: { lane: 'canary', slot: String(i), worker: 'probe' } });
        handles.push(h);
        if (canary) await h.exec(['echo', `nonce-${r}-${i}`]);
        await h.exec(['bash', agent], { env: { LANES_CARD_ID: `r${r}-${i}` } });
      }),
    );
    const stamps = readFileSync(stampFile, 'utf8')
      .split('\n')
      .filter((l) => l.startsWith(`r${r}-`))
      .map((l) => Number(l.split(' ')[1]) * 1000 - t0);
    return Math.max(...stamps);
  } finally {
    await Promise.all(handles.map((h) => h.terminate()));
    await provider.close();
  }
}

try {
  await round(-1, false); // warm-up, untimed
  const plain: number[] = [];
  const withCanary: number[] = [];
  for (let r = 0; r < ROUNDS; r++) (r % 2 ? withCanary : plain).push(await round(r, r % 2 === 1));
  const show = (xs: number[]) => `${median(xs).toFixed(0)} ms (rounds ${xs.map((x) => x.toFixed(0)).join(', ')})`;
  console.log(
    `\n${N} sandboxes at once (${isolation}), to the last agent's first instruction: create + agent ${show(plain)}; create + canary + agent ${show(withCanary)}: ${(median(withCanary) / median(plain)).toFixed(2)}×`,
  );
} finally {
  rmSync(dir, { recursive: true, force: true });
}
