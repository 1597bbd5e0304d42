import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import { checkModalPackage, installedModalPackage, MODAL_SDK_VERSION } from '../src/modal-package.js';

const SDK = { name: 'modal', version: MODAL_SDK_VERSION, repository: { type: 'git', url: 'git+https://github.com/modal-labs/modal-client.git' } };

describe('checkModalPackage', () => {
  it.each([
    ["Modal Labs' SDK on the pinned line", SDK, true],
    ['the SDK with its repository as a string', { ...SDK, repository: 'github:modal-labs/modal-client' }, true],
    ['another 0.x SDK', { ...SDK, version: '0.12.0' }, true],
    ['the unrelated browser package named modal', { name: 'modal', version: '1.2.0', repository: { url: 'git+https://github.com/someone/modal.git' } }, false],
    ['a package with no repository', { name: 'modal', version: '0.11.1' }, false],
    ["Modal Labs' SDK past the 0.x line", { ...SDK, version: '1.0.0' }, false],
    ['a package of another name', { ...SDK, name: 'modal-client' }, false],
    ['no package at all', undefined, false],
  ])('%s', (_name, pkg, ok) => {
    const check = checkModalPackage(pkg);
    expect(check.ok).toBe(ok);
    if (!check.ok) expect(check.reason).toContain(`npm i -E modal@${MODAL_SDK_VERSION}`);
  });
});

describe('installedModalPackage', () => {
  const dir = mkdtempSync(join(tmpdir(), 'lanes-modal-pkg-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it("reads the repo's own modal package, which passes", () => {
    expect(checkModalPackage(installedModalPackage())).toEqual({ ok: true });
  });

  it('reads whatever is installed where it resolves from: a wrong package there fails the check, naming its version', () => {
    mkdirSync(join(dir, 'node_modules/modal'), { recursive: true });
    writeFileSync(join(dir, 'node_modules/modal/package.json'), JSON.stringify({ name: 'modal', version: '1.4.2', main: 'index.js' }));
    writeFileSync(join(dir, 'node_modules/modal/index.js'), 'module.exports = {};');
    const check = checkModalPackage(installedModalPackage(pathToFileURL(join(dir, 'entry.js')).href));
    expect(check).toEqual({ ok: false, reason: expect.stringContaining('version 1.4.2') });
  });
});
