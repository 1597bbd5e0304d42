/**
 * What the canary a slot runs on every new sandbox costs a burst, on the provider alone: N local
 * sandboxes made at once, each running the agent (burst.ts's baseline), against the same with an
 * `echo <nonce>` exec between the create and the agent (what a slot does before a sandbox is live),
 * alternated round by round; the time until the N-th agent's first instruction, medians.
 *
 *   npx tsx --conditions=@lanes/source bench/probes/provider-canary.ts [--max-slots N] [--rounds R]
 */
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { createLocalProvider, detectIsolation, type SandboxHandle } from '@lanes/sandbox';
import { makeStampAgent } from '../support/stamp-agent.js';
import { median } from '../support/stats.js';

const { values } = parseArgs({ options: { 'max-slots': { type: 'string', default: '8' }, rounds: { type: 'string', default: '12' } } });
const N = Number(values['max-slots']);
const ROUNDS = Number(values.rounds);
const wallMs = () => performance.timeOrigin + performance.now();

const stamps = makeStampAgent('lanes-probe-canary-', 1_000);
const isolation = detectIsolation();

async function round(r: number, canary: boolean): Promise<number> {
  const provider = createLocalProvider({ baseDir: join(stamps.dir, `round-${r}`), isolation });
  const handles: SandboxHandle[] = [];
  try {
    const offset = stamps.offset();
    const t0 = wallMs();
    await Promise.all(
      Array.from({ length: N }, async (_, i) => {
        const h = await provider.create({ image: 'local', tags: { lane: 'canary', slot: String(i), worker: 'probe' } });
        handles.push(h);
        if (canary) await h.exec(['echo', `nonce-${r}-${i}`]);
        await h.exec(['bash', stamps.agent], { env: { LANES_CARD_ID: `r${r}-${i}`, LANES_CARD_FILE: `${h.workdir}/cards/r${r}-${i}/card.json` } });
      }),
    );
    return Math.max(...[...stamps.firstBySandbox(offset, `r${r}-`).values()].map((s) => s.at)) - t0;
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
  stamps.remove();
}
