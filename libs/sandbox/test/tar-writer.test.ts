import { spawnSync } from 'node:child_process';
import { buildTar, type TarEntry } from '../src/tar-writer.js';
import { describe, expect, it } from 'vitest';

/** GNU tar is the reference reader: what it lists is what a sandbox will extract. */
function listWithTar(archive: Uint8Array): string[] {
  const listed = spawnSync('tar', ['-t', '-v', '-f', '-'], { input: archive, encoding: 'utf8' });
  expect(listed.stderr).toBe('');
  expect(listed.status).toBe(0);
  return listed.stdout.split('\n').filter(Boolean);
}

function pathOfLength(length: number): string {
  const segments: string[] = [];
  let remaining = length;
  while (remaining > 0) {
    const take = Math.min(remaining, 50);
    segments.push('p'.repeat(Math.max(take - 1, 1)));
    remaining -= take;
  }
  return segments.join('/').slice(0, length);
}

describe('buildTar', () => {
  it('round-trips names of every length around the ustar and pax length-digit boundaries', () => {
    // 99-101: ustar's 100-byte name field; ~990-1010: the pax record length gains a digit.
    const lengths = [1, 99, 100, 101, 150, 255, 256, 980, 985, 990, 995, 1000, 1005, 1010, 4_000];
    const entries: TarEntry[] = lengths.map((length) => ({
      type: 'file',
      path: pathOfLength(length).replace(/\/$/, 'x'),
      mode: 0o644,
      mtimeMs: 0,
      data: new TextEncoder().encode(`${length}`),
    }));
    const listing = listWithTar(buildTar(entries));
    const names = listing.map((line) => line.split(/\s+/).slice(5).join(' '));
    expect(names).toEqual(entries.map((e) => e.path));
  });

  it('writes directories, symlinks with long targets, modes, sizes and non-ASCII names', () => {
    const longTarget = `../${'t'.repeat(150)}`;
    const listing = listWithTar(
      buildTar([
        { type: 'directory', path: 'dir', mode: 0o750, mtimeMs: 0 },
        { type: 'file', path: 'dir/ünïcødé 名前.txt', mode: 0o755, mtimeMs: 1_700_000_000_000, data: new Uint8Array(1_234) },
        { type: 'symlink', path: 'dir/link', mode: 0o777, mtimeMs: 0, target: longTarget },
      ]),
    );
    expect(listing[0]).toMatch(/^drwxr-x--- .* dir\/$/);
    expect(listing[1]).toMatch(/^-rwxr-xr-x .* 1234 .*dir\/ünïcødé 名前\.txt$/);
    expect(listing[2]).toContain(`dir/link -> ${longTarget}`);
  });
});
