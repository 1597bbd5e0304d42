import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const METER = fileURLToPath(new URL('../../bench/probes/process-meter.mjs', import.meta.url));

describe('bench/probes/process-meter', () => {
  it('a process it is preloaded into says, as it exits, each child it spawned and each GC pause', () => {
    const script = "require('node:child_process').spawnSync('true'); require('node:child_process').spawn('true'); globalThis.gc();";
    const { stderr } = spawnSync(process.execPath, ['--expose-gc', '--import', METER, '-e', script], { encoding: 'utf8' });
    const line = stderr.split('\n').find((l) => l.startsWith('PROCESS_METER'));
    expect(line).toBeDefined();
    // spawnSync does not go through ChildProcess: only the async spawn counts, as only it forks on the event loop.
    expect(line).toMatch(/\| spawns 1, wall [\d.]+ ms, cpu [\d.]+ ms: true@\d+:[\d.]+\/[\d.]+ \|/);
    expect(line).toMatch(/\| gc [1-9]\d*, [\d.]+ ms: \d+@\d+:[\d.]+/);
  });
});
