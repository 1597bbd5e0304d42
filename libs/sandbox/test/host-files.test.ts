import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { HostTrash, SYNC_FILE_MAX_BYTES, SYNC_REMOVE_MAX_ENTRIES, writeHostFile } from '../src/local/host-files.js';

describe('host files of a local sandbox', () => {
  const dirs: string[] = [];
  afterEach(async () => {
    for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
  });
  async function tempDir(): Promise<string> {
    const dir = await mkdtemp(join(tmpdir(), 'lanes-host-files-'));
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

  it('a small tree is gone when discard returns, and its path is free', async () => {
    const base = await tempDir();
    const trash = new HostTrash(join(base, 'trash'));
    await tree(join(base, 'card'), 20);
    await trash.discard(join(base, 'card'));
    expect(await exists(join(base, 'card'))).toBe(false);
    expect(await readdir(join(base, 'trash'))).toEqual([]);
  });

  it(`a tree of more than ${SYNC_REMOVE_MAX_ENTRIES} entries frees its path at once and is removed in the background`, async () => {
    const base = await tempDir();
    const trash = new HostTrash(join(base, 'trash'));
    await tree(join(base, 'repo'), SYNC_REMOVE_MAX_ENTRIES * 2);
    await trash.discard(join(base, 'repo'));
    // Past the bound nothing was removed synchronously: the whole tree sits in the trash for now.
    expect(readdirSync(join(base, 'trash'))).toHaveLength(1);
    expect(await exists(join(base, 'repo'))).toBe(false);
    // Made again at once, as a reset does: the background removal must not touch it.
    await mkdir(join(base, 'repo'));
    await writeFile(join(base, 'repo', 'new'), 'kept');
    await trash.settled();
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
    expect(await exists(join(base, 'link'))).toBe(false);
    expect(await exists(join(base, 'card'))).toBe(false);
    expect(await readFile(join(elsewhere, 'keep.txt'), 'utf8')).toBe('kept');
    expect(await readdir(join(base, 'trash'))).toEqual([]);
  });

  it('a missing path is nothing to discard', async () => {
    const base = await tempDir();
    await expect(new HostTrash(join(base, 'trash')).discard(join(base, 'never-made'))).resolves.toBeUndefined();
  });

  it('a write never goes through a link planted at its path: it fails, and the target is untouched', async () => {
    const base = await tempDir();
    await writeFile(join(base, 'victim'), 'untouched');
    await symlink(join(base, 'victim'), join(base, 'lanes-sync-staging.tar'));
    await expect(writeHostFile(join(base, 'lanes-sync-staging.tar'), 'payload')).rejects.toMatchObject({ code: 'ELOOP' });
    await expect(writeHostFile(join(base, 'lanes-sync-staging.tar'), new Uint8Array(SYNC_FILE_MAX_BYTES + 1))).rejects.toMatchObject({ code: 'ELOOP' });
    expect(await readFile(join(base, 'victim'), 'utf8')).toBe('untouched');
  });

  it('writes make a missing parent, small and large alike', async () => {
    const base = await tempDir();
    await writeHostFile(join(base, 'a', 'b', 'card.json'), '{"id":"c"}');
    expect(await readFile(join(base, 'a', 'b', 'card.json'), 'utf8')).toBe('{"id":"c"}');
    const large = new Uint8Array(SYNC_FILE_MAX_BYTES + 10).fill(7);
    await writeHostFile(join(base, 'c', 'large'), large);
    expect((await readFile(join(base, 'c', 'large'))).equals(Buffer.from(large))).toBe(true);
  });
});
