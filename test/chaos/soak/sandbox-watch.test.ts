import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { procStartTime } from './proc.js';
import { startSandboxWatch } from './sandbox-watch.js';

/** Long enough that only the first sample and the one `stop()` takes run: the test decides when. */
const NO_TIMER_MS = 3_600_000;

describe('startSandboxWatch: the provider-side view, from the records and /proc', () => {
  let dir: string;
  const children: ChildProcess[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'lanes-soak-watch-'));
  });
  afterEach(() => {
    for (const c of children.splice(0)) c.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  });

  /** A process standing in for a sandbox's root, and its record as the local provider writes it. */
  const sandbox = (id: string, worker: string) => {
    const child = spawn(process.execPath, ['-e', 'setInterval(() => {}, 1000)'], { stdio: 'ignore' });
    children.push(child);
    const pid = child.pid!;
    mkdirSync(join(dir, id, 'work'), { recursive: true });
    const record = { version: 1, id, tags: { lane: 'soak', slot: `${worker}-soak-0`, worker }, rootPid: pid, rootStartTime: procStartTime(pid)! };
    writeFileSync(join(dir, id, 'sandbox.json'), JSON.stringify(record));
    return child;
  };
  const exited = (c: ChildProcess) => new Promise<void>((r) => (c.exitCode !== null || c.signalCode !== null ? r() : c.once('exit', () => r())));

  it('sees each live sandbox with its owner, and finds it gone when its root dies or its record is removed', async () => {
    let clock = 1_000;
    const killedRoot = sandbox('lsb-a', 'host-1-aaaa');
    sandbox('lsb-b', 'host-1-aaaa');
    sandbox('lsb-c', 'host-2-bbbb');
    mkdirSync(join(dir, 'lsb-d')); // made, its record not written yet: not seen
    const watch = startSandboxWatch(dir, () => clock, NO_TIMER_MS);
    killedRoot.kill('SIGKILL');
    await exited(killedRoot);
    rmSync(join(dir, 'lsb-b'), { recursive: true });
    clock = 1_500;
    const sightings = watch.stop().sort((a, b) => a.sandboxId.localeCompare(b.sandboxId));
    expect(sightings).toEqual([
      { sandboxId: 'lsb-a', worker: 'host-1-aaaa', slot: 'host-1-aaaa-soak-0', firstSeenAtMs: 1_000, lastSeenAtMs: 1_000, goneAtMs: 1_500, gone: 'process-dead' },
      { sandboxId: 'lsb-b', worker: 'host-1-aaaa', slot: 'host-1-aaaa-soak-0', firstSeenAtMs: 1_000, lastSeenAtMs: 1_000, goneAtMs: 1_500, gone: 'record-removed' },
      { sandboxId: 'lsb-c', worker: 'host-2-bbbb', slot: 'host-2-bbbb-soak-0', firstSeenAtMs: 1_000, lastSeenAtMs: 1_500 },
    ]);
  });

  it('never counts a record whose root was already dead when first listed as seen', async () => {
    const root = sandbox('lsb-a', 'host-1-aaaa');
    root.kill('SIGKILL');
    await exited(root);
    expect(startSandboxWatch(dir, () => 1, NO_TIMER_MS).stop()).toEqual([]);
  });
});
