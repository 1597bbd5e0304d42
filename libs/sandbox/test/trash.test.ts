import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { SYNC_REMOVE_MAX_ENTRIES, emptyTrash } from '../runtime/trash.mjs';
import { HostTrash } from '../src/local/host-files.js';
import { trashDir } from '../src/local/sandbox-registry.js';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';
import { waitFor } from './support/wait-for.js';

describe("a local sandbox's trash", () => {
  const dirs: string[] = [];
  let fixture: LocalFixture | undefined;
  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });
  async function tempDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'lanes-trash-'));
    dirs.push(dir);
    return dir;
  }
  const exists = (path: string) =>
    lstat(path).then(
      () => true,
      () => false,
    );
  /** A tree of `files` files spread over a few directories. */
  async function tree(root: string, files: number): Promise<void> {
    for (let i = 0; i < files; i++) {
      const dir = join(root, `d${i % 7}`, `e${i % 3}`);
      await mkdir(dir, { recursive: true });
      await writeFile(join(dir, `f${i}`), 'x');
    }
  }

  it(`empties small trees and ones past ${SYNC_REMOVE_MAX_ENTRIES} entries; a path made again at once is not touched`, async () => {
    const base = await tempDir();
    const trash = new HostTrash(join(base, 'trash'));
    await tree(join(base, 'card'), 20);
    await tree(join(base, 'repo'), SYNC_REMOVE_MAX_ENTRIES * 2);
    await trash.discard(join(base, 'card'));
    await trash.discard(join(base, 'repo'));
    // Made again at once, as a reset does.
    await mkdir(join(base, 'repo'));
    await writeFile(join(base, 'repo', 'new'), 'kept');
    expect(await emptyTrash(join(base, 'trash'))).toEqual([]);
    expect(await readdir(join(base, 'trash'))).toEqual([]);
    expect(await readFile(join(base, 'repo', 'new'), 'utf8')).toBe('kept');
  });

  it('links are removed, never followed: what they point at is untouched', async () => {
    const base = await tempDir();
    const elsewhere = await tempDir();
    await writeFile(join(elsewhere, 'keep.txt'), 'kept');
    const trash = new HostTrash(join(base, 'trash'));
    // The discarded path itself a link, and a link inside a discarded directory.
    await symlink(elsewhere, join(base, 'link'));
    await mkdir(join(base, 'card'));
    await symlink(elsewhere, join(base, 'card', 'inner-link'));
    await trash.discard(join(base, 'link'));
    await trash.discard(join(base, 'card'));
    expect(await emptyTrash(join(base, 'trash'))).toEqual([]);
    expect(await readdir(join(base, 'trash'))).toEqual([]);
    expect(await readFile(join(elsewhere, 'keep.txt'), 'utf8')).toBe('kept');
  });

  it('a missing trash is empty', async () => {
    const base = await tempDir();
    expect(await emptyTrash(join(base, 'never-made'))).toEqual([]);
  });

  it("the sandbox's own init empties it, beside its commands", async () => {
    fixture = await localFixture();
    const handle = await fixture.provider.create(testSpec());
    const trash = trashDir(dirname(handle.workdir));
    // As the host leaves them: a card's tree and a link, moved aside.
    await tree(join(trash, 'card'), 20);
    await symlink(handle.workdir, join(trash, 'link'));
    await waitFor('the init to empty its trash', async () => (await readdir(trash)).length === 0 || undefined);
    expect(await exists(handle.workdir)).toBe(true);
    // The sandbox still answers: the sweep ran beside its commands, not instead of them.
    expect(await handle.exec(['true'])).toMatchObject({ exitCode: 0 });
  });
});
