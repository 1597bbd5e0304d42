import { mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError, SyncBatchError } from '@lanes/contracts';
import { syncFiles, type SandboxHandle } from '@lanes/sandbox';
import type { SyncProgress, SyncTarget } from '../src/file-sync.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';

const FILE_COUNT = 5_000;
const DIR_COUNT = 50;
/** Four 45-character segments put every file path well past 200 characters (ustar's limit is 100). */
const DEEP_PREFIX = ['a', 'b', 'c', 'd'].map((c) => c.repeat(45)).join('/');

function deepFile(i: number): string {
  return `${DEEP_PREFIX}/dir-${i % DIR_COUNT}/file-${i}-${'x'.repeat(20)}.txt`;
}

const text = (bytes: Uint8Array | undefined): string | undefined => (bytes === undefined ? undefined : new TextDecoder().decode(bytes));

describe('syncFiles', () => {
  let fixture: LocalFixture;
  let handle: SandboxHandle;
  let hostDir: string;

  beforeAll(async () => {
    fixture = await localFixture();
    handle = await fixture.provider.create(testSpec());
    hostDir = await mkdtemp(join(tmpdir(), 'lanes-sync-src-'));
    const tree = join(hostDir, 'tree');
    for (let d = 0; d < DIR_COUNT; d += 1) await mkdir(join(tree, DEEP_PREFIX, `dir-${d}`), { recursive: true });
    for (let start = 0; start < FILE_COUNT; start += 500) {
      await Promise.all(Array.from({ length: Math.min(500, FILE_COUNT - start) }, (_, k) => start + k).map((i) => writeFile(join(tree, deepFile(i)), `content of ${i}\n`)));
    }
    await mkdir(join(tree, 'empty-dir'));
    await writeFile(join(tree, 'run.sh'), '#!/bin/sh\necho ran\n', { mode: 0o755 });
    await symlink(`${'../'.repeat(1)}run.sh`, join(tree, 'empty-dir-link'));
    await writeFile(join(hostDir, 'single.txt'), 'single\n');
    await writeFile(join(hostDir, 'bad.txt'), 'bad\n');
    await mkdir(join(hostDir, 'small'));
    for (let i = 0; i < 30; i += 1) await writeFile(join(hostDir, 'small', `f${i}.txt`), `small ${i}\n`);
  }, 120_000);

  afterAll(async () => {
    await fixture.cleanup();
    await rm(hostDir, { recursive: true, force: true });
  });

  it('syncs 5,000 files with 200+ character paths in several batches, intact', async () => {
    const progress: SyncProgress[] = [];
    const dest = `${handle.workdir}/synced`;
    const summary = await syncFiles(
      handle,
      [
        { from: 'tree', to: dest },
        { from: 'single.txt', to: 'relative/single.txt' },
      ],
      { baseDir: hostDir, onProgress: (p) => progress.push(p) },
    );
    expect(summary.batches).toBeGreaterThan(1);
    expect(progress.map((p) => p.batch)).toEqual(Array.from({ length: summary.batches }, (_, i) => i + 1));
    expect(progress.every((p) => p.batches === summary.batches)).toBe(true);
    expect(progress.at(-1)).toMatchObject({ entries: summary.entries, totalEntries: summary.entries });

    const count = await handle.exec(['sh', '-c', 'find "$1" -type f -name "file-*" | wc -l', 'count', dest]);
    expect(count.stdout.trim()).toBe(String(FILE_COUNT));
    for (const i of [0, 1, 777, 2_500, FILE_COUNT - 1]) {
      const path = `${dest}/${deepFile(i)}`;
      expect(path.length).toBeGreaterThan(200);
      expect(text(await handle.readFile(path))).toBe(`content of ${i}\n`);
    }
    expect(text(await handle.readFile(`${handle.workdir}/relative/single.txt`))).toBe('single\n');
    // Modes, empty directories and symlinks survive; no staging archive is left behind.
    expect(await handle.exec([`${dest}/run.sh`])).toMatchObject({ exitCode: 0, stdout: 'ran\n' });
    expect((await handle.exec(['test', '-d', `${dest}/empty-dir`])).exitCode).toBe(0);
    expect((await handle.exec(['readlink', `${dest}/empty-dir-link`])).stdout).toBe('../run.sh\n');
    const leftovers = await handle.exec(['sh', '-c', 'ls -A "$1" | grep -c lanes-sync || true', 'ls', handle.workdir]);
    expect(leftovers.stdout.trim()).toBe('0');

    // Re-applying (after a respawn, or twice) is fine and changes nothing.
    const again = await syncFiles(handle, [{ from: 'tree', to: dest }], { baseDir: hostDir });
    expect(again.batches).toBe(summary.batches);
    expect((await handle.exec(['sh', '-c', 'find "$1" -type f -name "file-*" | wc -l', 'count', dest])).stdout.trim()).toBe(String(FILE_COUNT));
  });

  it('a failing batch throws SyncBatchError naming it; earlier batches are applied, later ones not attempted', async () => {
    // A regular file where the destination needs a directory: tar fails in exactly that batch.
    await handle.writeFile(`${handle.workdir}/blocker`, 'i am a file');
    const progress: number[] = [];
    const error = await syncFiles(
      handle,
      [
        { from: 'small', to: 'good' },
        { from: 'bad.txt', to: 'blocker/inside/bad.txt' },
        { from: 'single.txt', to: 'after/single.txt' },
      ],
      { baseDir: hostDir, maxFilesPerBatch: 10, onProgress: (p) => progress.push(p.batch) },
    ).then(
      () => undefined,
      (e: unknown) => e,
    );
    // 31 entries for small/ (its directory + 30 files), then bad.txt: batch 4 of 4 holds entries 31-33.
    expect(error).toBeInstanceOf(SyncBatchError);
    expect(error).toMatchObject({ batch: 4, batches: 4 });
    expect(progress).toEqual([1, 2, 3]);
    expect(text(await handle.readFile(`${handle.workdir}/good/f0.txt`))).toBe('small 0\n');
  });

  it('every batch has its own deadline', async () => {
    // A sandbox whose unpack hangs: the batch must fail on its deadline, not hang the sync.
    const hanging: SyncTarget = {
      workdir: handle.workdir,
      writeFile: (path, data) => handle.writeFile(path, data),
      exec: (_argv, options) => handle.exec(['sleep', '30'], options),
    };
    const startedAtMs = Date.now();
    const error = await syncFiles(hanging, [{ from: 'single.txt', to: 'deadline/single.txt' }], { baseDir: hostDir, batchTimeoutMs: 300 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SyncBatchError);
    expect(error).toMatchObject({ batch: 1, batches: 1 });
    // Ordering, not speed: the batch failed on its deadline, before the hanging command (sleep 30) could end.
    expect(Date.now() - startedAtMs).toBeLessThan(30_000);
    expect(await handle.exec(['echo', 'ok'])).toMatchObject({ exitCode: 0 });
  });

  it('a missing source is a ConfigError naming the entry; an empty list is a no-op', async () => {
    await expect(syncFiles(handle, [{ from: 'no-such-dir', to: 'x' }], { baseDir: hostDir })).rejects.toBeInstanceOf(ConfigError);
    expect(await syncFiles(handle, [], { baseDir: hostDir })).toEqual({ batches: 0, entries: 0, bytes: 0 });
  });

  it('the unpack command is held to the argv byte budget', async () => {
    const error = await syncFiles(handle, [{ from: 'single.txt', to: 'budget.txt' }], { baseDir: hostDir, maxArgBytes: 16 }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(SyncBatchError);
  });
});
