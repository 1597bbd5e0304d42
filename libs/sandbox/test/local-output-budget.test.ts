import { readFileSync } from 'node:fs';
import { agentLimits } from '@lanes/contracts';
import { sandboxMembers, type SandboxHandle } from '@lanes/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';

const RATE = agentLimits.SANDBOX_OUTPUT_MAX_BYTES_PER_S;
/** How long the agent prints as fast as it can: `yes` makes hundreds of MB a second here. */
const FLOOD_S = 2;

/** The largest resident set of the sandbox's init (`local-init.mjs`) seen while `run` runs, in MiB. */
async function initRssWhile<T>(handle: SandboxHandle, run: Promise<T>): Promise<{ result: T; worstMiB: number }> {
  let worstKb = 0;
  const sample = () => {
    for (const pid of sandboxMembers(handle.id)) {
      try {
        // By its command line: a newer node names its main thread (comm), and not always `node`.
        if (!readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes('local-init.mjs')) continue;
        worstKb = Math.max(worstKb, Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0));
      } catch {
        // gone meanwhile
      }
    }
  };
  const timer = setInterval(sample, 50);
  try {
    const result = await run;
    return { result, worstMiB: worstKb / 1024 };
  } finally {
    clearInterval(timer);
  }
}

describe('local sandbox output, read at a bounded rate', () => {
  let fixture: LocalFixture | undefined;
  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
  });

  it('a command printing as fast as it can is read at SANDBOX_OUTPUT_MAX_BYTES_PER_S; the init holds back instead of buffering, and the output after it still arrives', async () => {
    fixture = await localFixture();
    const handle = await fixture.provider.create(testSpec());
    let read = 0;
    const started = performance.now();
    const { result, worstMiB } = await initRssWhile(
      handle,
      handle.exec(['sh', '-c', `timeout ${FLOOD_S} yes flood-line-of-text; echo END >&2; echo last-line`], {
        timeoutMs: 60_000,
        onOutput: (_stream, chunk) => {
          read += chunk.length;
        },
      }),
    );
    const elapsedS = (performance.now() - started) / 1000;
    console.info(`flood of ${FLOOD_S} s: ${(read / 1048576).toFixed(1)} MiB read in ${elapsedS.toFixed(2)} s, the init's RSS at most ${worstMiB.toFixed(1)} MiB`);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toBe('END\n');
    expect(result.stdout).toMatch(/\nlast-line\n$/);
    // Read no faster than the rate (a window's share and one chunk over, at most), however fast it printed.
    expect(read / elapsedS).toBeLessThan(1.25 * RATE);
    expect(read).toBeGreaterThan(RATE);
    // What the host has not read waits in the command's pipe, not in the init.
    expect(worstMiB).toBeGreaterThan(0);
    expect(worstMiB).toBeLessThan(150);
  });
});
