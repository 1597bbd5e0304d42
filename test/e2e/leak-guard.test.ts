import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { createLocalProvider, createProviderRegistry, isAlive, sandboxMembers, type SandboxHandle } from '@lanes/sandbox';
import { parseLanesConfig } from '@lanes/contracts';
import { TEST_RUN_ENV, reapRun, runProcesses } from '../harness/test-run.js';
import { waitFor } from '../harness/index.js';

/** A stand-in sandbox process: carries LANES_SANDBOX_ID and a workdir under the temp dir, like a real one. */
function sandboxLike(dir: string, runId: string | undefined): ChildProcess {
  const { [TEST_RUN_ENV]: _ours, ...outside } = process.env;
  const env = { ...outside, LANES_SANDBOX_ID: `lsb-guard-${Math.random().toString(36).slice(2)}`, LANES_SANDBOX_WORKDIR: dir };
  return spawn('sleep', ['60'], { env: runId === undefined ? env : { ...env, [TEST_RUN_ENV]: runId }, stdio: 'ignore' });
}

const running = (child: ChildProcess) => child.exitCode === null && child.signalCode === null;

describe('leak guard', () => {
  const runId = process.env[TEST_RUN_ENV];
  let dir: string;
  const children: ChildProcess[] = [];
  const sandboxes: SandboxHandle[] = [];

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-guard-'));
  });
  afterEach(async () => {
    for (const child of children.splice(0)) if (running(child)) child.kill('SIGKILL');
    for (const sandbox of sandboxes.splice(0)) await sandbox.terminate();
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('gives the run an id that its workers inherit', () => {
    expect(runId).toMatch(/^run-/);
  });

  it('kills what its run left running and nothing of another run or of no run', async () => {
    // A run of its own, so the sweep cannot reach the sandboxes of suites running beside this one.
    const simulatedRun = `run-guard-test-${process.pid}`;
    const leftover = sandboxLike(dir, simulatedRun);
    const otherRun = sandboxLike(dir, 'run-someone-else');
    const noRun = sandboxLike(dir, undefined);
    children.push(leftover, otherRun, noRun);
    await waitFor('the stand-ins to be listed', () => runProcesses(simulatedRun).some((p) => p.pid === leftover.pid));

    const reaped = reapRun(simulatedRun);
    expect(reaped).toEqual([{ pid: leftover.pid, kind: 'sandbox' }]);
    await waitFor('the leftover to die', () => !running(leftover));
    expect(running(otherRun)).toBe(true);
    expect(running(noRun)).toBe(true);
  });

  it("lists a worker's real sandbox and its command as the run's, and leaves a sandbox from outside the run alone", async () => {
    const lane = parseLanesConfig({ lanes: [{ name: 'guard', slots: 1, agent: ['true'] }] }).lanes[0]!;
    // The path workers take: the provider registry, whose sandbox env drops control-plane variables.
    const inRun = await (await createProviderRegistry({ sandboxDir: join(dir, 'in'), env: process.env, lanes: [lane] }))
      .forLane(lane)
      .create({ image: 'local', tags: { lane: 'guard', slot: '0', worker: 'w-in' } });
    sandboxes.push(inRun);
    // A `lanes up` started from a shell beside the tests: its environment has no run id.
    const { [TEST_RUN_ENV]: _ours, ...outsideEnv } = process.env;
    const outside = await createLocalProvider({ baseDir: join(dir, 'out'), baseEnv: outsideEnv }).create({
      image: 'local',
      tags: { lane: 'guard', slot: '0', worker: 'w-out' },
    });
    sandboxes.push(outside);
    const commands = [inRun, outside].map((s) => s.exec(['sleep', '60']).catch(() => undefined));

    const listedSandboxPids = () =>
      new Set(
        runProcesses(runId!)
          .filter((p) => p.kind === 'sandbox')
          .map((p) => p.pid),
      );
    const inRunPids = await waitFor('the in-run sandbox command to start', () => {
      const pids = sandboxMembers(inRun.id);
      return pids.length >= 2 ? pids : undefined;
    });
    const outsidePids = await waitFor('the outside sandbox command to start', () => {
      const pids = sandboxMembers(outside.id);
      return pids.length >= 2 ? pids : undefined;
    });
    const listed = listedSandboxPids();
    expect(inRunPids.every((pid) => listed.has(pid))).toBe(true);
    expect(outsidePids.some((pid) => listed.has(pid))).toBe(false);
    expect(outsidePids.every((pid) => isAlive(pid))).toBe(true);
    for (const sandbox of sandboxes.splice(0)) await sandbox.terminate();
    await Promise.all(commands);
  });
});
