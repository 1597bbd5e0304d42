import { lstat, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxHandle } from '@lanes/sandbox';
import { afterEach, describe, expect, it } from 'vitest';
import { localFixture, testSpec, type LocalFixture } from './support/local-fixture.js';

/**
 * The local reset makes each target with `mkdir -p` first and removes only what was there already
 * (see LocalSandbox.resetDirs). These are the cases where the target exists in a form mkdir does not
 * clear: a file, a link, content, the same path twice, targets inside one another in either order.
 */
describe('local resetDirs: targets that already exist', () => {
  let fixture: LocalFixture | undefined;
  const outside: string[] = [];

  afterEach(async () => {
    await fixture?.cleanup();
    fixture = undefined;
    for (const dir of outside.splice(0)) await rm(dir, { recursive: true, force: true });
  });

  async function sandbox(): Promise<SandboxHandle> {
    fixture = await localFixture();
    return fixture.provider.create(testSpec());
  }

  const isEmptyDir = async (path: string) => (await lstat(path)).isDirectory() && (await readdir(path)).length === 0;

  it('a file, or a link to a directory elsewhere, becomes an empty directory; what the link pointed at is untouched', async () => {
    const handle = await sandbox();
    const elsewhere = await mkdtemp(join(tmpdir(), 'lanes-reset-outside-'));
    outside.push(elsewhere);
    await writeFile(join(elsewhere, 'keep.txt'), 'kept');
    const file = `${handle.workdir}/cards/c1/out`;
    const link = `${handle.workdir}/cards/c1/work`;
    await mkdir(`${handle.workdir}/cards/c1`, { recursive: true });
    await writeFile(file, 'a file where the directory goes');
    await symlink(elsewhere, link);

    expect(await handle.resetDirs([file, link])).toMatchObject({ exitCode: 0 });
    expect(await isEmptyDir(file)).toBe(true);
    expect(await isEmptyDir(link)).toBe(true);
    expect(await readFile(join(elsewhere, 'keep.txt'), 'utf8')).toBe('kept');
  });

  it('the same path twice, with content, is emptied once and exists', async () => {
    const handle = await sandbox();
    const out = `${handle.workdir}/cards/c1/out`;
    await handle.writeFile(`${out}/result.json`, '{}');
    expect(await handle.resetDirs([out, out])).toMatchObject({ exitCode: 0 });
    expect(await isEmptyDir(out)).toBe(true);
  });

  it.each([
    ['parent first', (p: string, c: string) => [p, c]],
    ['child first', (p: string, c: string) => [c, p]],
  ])('targets inside one another (%s), both with content: both exist, empty but for the child', async (_order, order) => {
    const handle = await sandbox();
    const parent = `${handle.workdir}/cards/c1`;
    const child = `${parent}/out`;
    await handle.writeFile(`${parent}/card.json`, 'old');
    await handle.writeFile(`${child}/result.json`, 'old');
    expect(await handle.resetDirs(order(parent, child))).toMatchObject({ exitCode: 0 });
    expect(await readdir(parent)).toEqual(['out']);
    expect(await isEmptyDir(child)).toBe(true);
  });

  it('a fresh card: every target made, and a card file written beside them lands without a mkdir of its own', async () => {
    const handle = await sandbox();
    const dir = `${handle.workdir}/cards/fresh`;
    expect(await handle.resetDirs([`${dir}/out`, `${dir}/work`])).toMatchObject({ exitCode: 0 });
    await handle.writeFile(`${dir}/card.json`, '{"id":"fresh"}');
    expect((await readdir(dir)).sort()).toEqual(['card.json', 'out', 'work']);
    expect(await isEmptyDir(`${dir}/out`)).toBe(true);
  });
});
