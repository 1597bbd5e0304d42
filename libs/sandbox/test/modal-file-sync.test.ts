import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { syncFiles, type SandboxHandle } from '@lanes/sandbox';
import { modalFixture, type ModalFixture } from './support/modal-fixture.js';

const FILE_COUNT = 5_000;

// A lane's `files` on Modal: the archive goes up through the real SDK's filesystem API (a stdin
// stream into its fs helper) and is unpacked by an exec, batch by batch.
describe('syncFiles on the Modal provider (real SDK, local server)', () => {
  let f: ModalFixture;
  let handle: SandboxHandle;
  let hostDir: string;

  beforeAll(async () => {
    f = await modalFixture();
    handle = await f.provider.create(f.spec);
    hostDir = await mkdtemp(join(tmpdir(), 'lanes-modal-sync-src-'));
    for (let d = 0; d < 50; d += 1) await mkdir(join(hostDir, 'tree', `dir-${d}`), { recursive: true });
    for (let start = 0; start < FILE_COUNT; start += 500) {
      await Promise.all(
        Array.from({ length: Math.min(500, FILE_COUNT - start) }, (_, k) => start + k).map((i) =>
          writeFile(join(hostDir, 'tree', `dir-${i % 50}`, `file-${i}.txt`), `content of ${i}\n`),
        ),
      );
    }
  }, 120_000);

  afterAll(async () => {
    await handle?.terminate().catch(() => undefined);
    await f?.cleanup();
    await rm(hostDir, { recursive: true, force: true });
  });

  it('syncs 5,000 files in several batches, intact', async () => {
    const dest = `${handle.workdir}/synced`;
    const summary = await syncFiles(handle, [{ from: 'tree', to: dest }], { baseDir: hostDir });
    expect(summary.batches).toBeGreaterThan(1);
    const count = await handle.exec(['sh', '-c', 'find "$1" -type f -name "file-*" | wc -l', 'count', dest]);
    expect(count.stdout.trim()).toBe(String(FILE_COUNT));
    expect(new TextDecoder().decode(await handle.readFile(`${dest}/dir-7/file-4957.txt`))).toBe('content of 4957\n');
  });
});
