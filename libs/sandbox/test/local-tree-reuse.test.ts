import { mkdtemp, open, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxHandle } from '@lanes/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { detectIsolation } from '../src/local/isolation.js';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';

/**
 * The next card's reset takes over the last card's directories (tree-reuse.ts) only when the
 * sandbox's init saw no process left when the last command ended: in a PID namespace, with nothing
 * left behind. A directory's inode says whether it was reused or made anew; the test holds the old
 * directory open meanwhile, so a removed one's inode number cannot be handed to the new one.
 */
describe('local resetDirs: the last card tree reused only when nothing can hold it', () => {
  let fixture: LocalFixture | undefined;

  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
  });

  async function sandbox(isolation: 'pid-namespace' | 'process-group'): Promise<SandboxHandle> {
    fixture = await localFixture({ isolation });
    return fixture.provider.create(testSpec());
  }
  const card = (handle: SandboxHandle, id: string) => ({
    dir: `${handle.workdir}/cards/${id}`,
    out: `${handle.workdir}/cards/${id}/out`,
    work: `${handle.workdir}/cards/${id}/work`,
  });

  /** Card c1 as the runner leaves it: its directories, card file, a result and a work file; then its command. */
  async function runFirstCard(handle: SandboxHandle, argv: string[]): Promise<void> {
    const c1 = card(handle, 'c1');
    expect(await handle.resetDirs([c1.out, c1.work])).toMatchObject({ exitCode: 0 });
    await handle.writeFile(`${c1.dir}/card.json`, '{"id":"c1"}');
    await writeFile(`${c1.out}/result.json`, '{}');
    await writeFile(`${c1.work}/scratch.txt`, 'c1 was here');
    expect(await handle.exec(argv, { cwd: c1.work })).toMatchObject({ exitCode: 0 });
  }
  /** Card c2's reset, removing c1: whether c2 got c1's directory, and c2's targets empty, c1 gone. */
  async function resetSecondCard(handle: SandboxHandle): Promise<{ reused: boolean }> {
    const [c1, c2] = [card(handle, 'c1'), card(handle, 'c2')];
    const held = await open(c1.dir, 'r');
    const before = (await held.stat()).ino;
    try {
      expect(await handle.resetDirs([c2.out, c2.work], { remove: [c1.dir] })).toMatchObject({ exitCode: 0 });
    } finally {
      await held.close();
    }
    expect((await readdir(c2.dir)).sort()).toEqual(['out', 'work']);
    expect(await readdir(c2.out)).toEqual([]);
    expect(await readdir(c2.work)).toEqual([]);
    await expect(stat(c1.dir)).rejects.toMatchObject({ code: 'ENOENT' });
    return { reused: (await stat(c2.dir)).ino === before };
  }

  it.skipIf(detectIsolation() !== 'pid-namespace')('nothing left running: the tree is reused, emptied of the last card', async () => {
    const handle = await sandbox('pid-namespace');
    await runFirstCard(handle, ['true']);
    expect(await resetSecondCard(handle)).toEqual({ reused: true });
  });

  it.skipIf(detectIsolation() !== 'pid-namespace')('a process left behind (holding the work directory): the tree is removed, the next card gets new directories', async () => {
    const handle = await sandbox('pid-namespace');
    await runFirstCard(handle, ['sh', '-c', 'sleep 30 >/dev/null 2>&1 &']);
    expect(await resetSecondCard(handle)).toEqual({ reused: false });
    // Once a command ends with nothing left, reuse comes back: this one ends when the sleep is gone (reaped too).
    expect(await handle.exec(['sh', '-c', 'pkill -x sleep; while pgrep -x sleep >/dev/null; do sleep 0.05; done'])).toMatchObject({ exitCode: 0 });
    const c3 = card(handle, 'c3');
    const held = await open(card(handle, 'c2').dir, 'r');
    const before = (await held.stat()).ino;
    expect(await handle.resetDirs([c3.out, c3.work], { remove: [card(handle, 'c2').dir] })).toMatchObject({ exitCode: 0 });
    await held.close();
    expect((await stat(c3.dir)).ino).toBe(before);
  });

  it.skipIf(detectIsolation() !== 'pid-namespace')('links the last card left, in place of its directory or inside it, are removed, never followed', async () => {
    const handle = await sandbox('pid-namespace');
    const elsewhere = await mkdtemp(join(tmpdir(), 'lanes-reuse-outside-'));
    try {
      await writeFile(join(elsewhere, 'keep.txt'), 'kept');
      // Inside the card's directory: a link in its work directory, and one in place of its output directory.
      await runFirstCard(handle, ['sh', '-c', 'ln -s "$1" link && rm -r ../out && ln -s "$1" ../out', 'agent', elsewhere]);
      expect(await resetSecondCard(handle)).toEqual({ reused: true });
      // In place of the card's directory itself.
      const [c2, c3] = [card(handle, 'c2'), card(handle, 'c3')];
      expect(await handle.exec(['sh', '-c', 'rm -r "$1" && ln -s "$2" "$1"', 'agent', c2.dir, elsewhere], { cwd: handle.workdir })).toMatchObject({ exitCode: 0 });
      expect(await handle.resetDirs([c3.out, c3.work], { remove: [c2.dir] })).toMatchObject({ exitCode: 0 });
      expect((await readdir(c3.dir)).sort()).toEqual(['out', 'work']);
      expect(await readdir(elsewhere)).toEqual(['keep.txt']);
      expect(await readFile(join(elsewhere, 'keep.txt'), 'utf8')).toBe('kept');
    } finally {
      await rm(elsewhere, { recursive: true, force: true });
    }
  });

  it('in a process group the init cannot see the sandbox alone: never reused', async () => {
    const handle = await sandbox('process-group');
    await runFirstCard(handle, ['true']);
    expect(await resetSecondCard(handle)).toEqual({ reused: false });
  });
});
