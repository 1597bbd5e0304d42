import { afterEach, describe, expect, it } from 'vitest';
import { modalFixture, type ModalFixture } from './support/modal-fixture.js';

/**
 * Below what the local server streams (~6 MiB/s here, unpaced), so a reader that ignored its budget
 * would read several times the rate; the provider's default is SANDBOX_OUTPUT_MAX_BYTES_PER_S.
 */
const RATE = 1024 * 1024;
/** How long the agent prints as fast as it can. */
const FLOOD_S = 2;

// The real SDK (modal@0.11.1) over the local Modal server, whose sandboxes are real processes.
describe('Modal sandbox output, read at a bounded rate', () => {
  let fixture: ModalFixture | undefined;
  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
  });

  it('a command printing as fast as it can is read at the output budget, stdout and stderr together; once it exits, the rest and its tail still arrive', async () => {
    fixture = await modalFixture({ outputDrainMs: 30_000, outputBytesPerS: RATE });
    const handle = await fixture.provider.create(fixture.spec);
    let read = 0;
    // What arrived while the flood surely still ran: before FLOOD_S from the exec's start.
    let readInFlood = 0;
    const started = performance.now();
    const result = await handle.exec(['sh', '-c', `timeout ${FLOOD_S} yes flood-line-of-text & timeout ${FLOOD_S} yes err-line >&2; wait; echo END >&2; echo last-line`], {
      timeoutMs: 60_000,
      onOutput: (_stream, chunk) => {
        read += Buffer.byteLength(chunk);
        if (performance.now() - started < FLOOD_S * 1000) readInFlood += Buffer.byteLength(chunk);
      },
    });
    console.info(`Modal flood of ${FLOOD_S} s: ${(readInFlood / 1048576).toFixed(1)} MiB read in its first ${FLOOD_S} s, ${(read / 1048576).toFixed(1)} MiB in all`);
    expect(result.exitCode).toBe(0);
    expect(result.stderr).toMatch(/END\n$/);
    expect(result.stdout).toMatch(/\nlast-line\n$/);
    // Read no faster than the rate: its bytes over the time, a window's share and the one message
    // read before its wait (the local server sends up to 1 MiB in one), however fast it printed.
    expect(readInFlood).toBeLessThan(RATE * FLOOD_S + RATE * 0.1 + 1024 * 1024);
    expect(readInFlood).toBeGreaterThan(RATE);
  });
});
