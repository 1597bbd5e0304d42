import { execFileSync } from 'node:child_process';
import { link, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { AgentFileError } from '@lanes/contracts';
import { readBeneath } from '../src/local/read-beneath.js';

const dirs: string[] = [];
const servers: Server[] = [];
afterAll(async () => {
  for (const s of servers) s.close();
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/** A workdir with cards/c1/out/ in it, as a card leaves it. */
async function workdir(): Promise<{ root: string; out: string }> {
  const root = await mkdtemp(join(tmpdir(), 'lanes-read-beneath-'));
  dirs.push(root);
  const out = join(root, 'cards', 'c1', 'out');
  await mkdir(out, { recursive: true });
  return { root, out };
}

const RESULT = ['cards', 'c1', 'out', 'result.json'];
const MAX = 1024;

function refusal(fn: () => unknown): AgentFileError {
  try {
    fn();
  } catch (error) {
    expect(error).toBeInstanceOf(AgentFileError);
    return error as AgentFileError;
  }
  throw new Error('read was not refused');
}

describe('readBeneath: what an agent leaves is read safely', () => {
  it('reads a regular file whole, and a missing one (or a missing directory) as undefined', async () => {
    const { root, out } = await workdir();
    expect(readBeneath(root, RESULT, MAX)).toBeUndefined();
    expect(readBeneath(root, ['cards', 'gone', 'out', 'result.json'], MAX)).toBeUndefined();
    await writeFile(join(out, 'result.json'), '{"pr":"https://x/1"}');
    expect(readBeneath(root, RESULT, MAX)?.toString()).toBe('{"pr":"https://x/1"}');
    const exact = Buffer.alloc(MAX, 'a');
    await writeFile(join(out, 'result.json'), exact);
    expect(readBeneath(root, RESULT, MAX)?.equals(exact)).toBe(true);
    await writeFile(join(out, 'result.json'), '');
    expect(readBeneath(root, RESULT, MAX)?.length).toBe(0);
  });

  it('refuses a FIFO at once instead of blocking in the kernel (it froze the whole stack)', async () => {
    const { root, out } = await workdir();
    execFileSync('mkfifo', [join(out, 'result.json')]);
    const e = refusal(() => readBeneath(root, RESULT, MAX));
    expect(e.rule).toBe('not-regular');
    expect(e.message).toBe('result.json is a FIFO, not a regular file');
  });

  it.each([
    ['/dev/zero', 'never ends'],
    ['/proc/self/environ', "the worker's own environment"],
    ['/etc/hostname', 'a file of the host'],
  ])('refuses a link to %s (%s) without opening it', async (target) => {
    const { root, out } = await workdir();
    await symlink(target, join(out, 'result.json'));
    const e = refusal(() => readBeneath(root, RESULT, MAX));
    expect(e.rule).toBe('link');
    expect(e.message).toBe('result.json is a symbolic link; lanes reads no file through a link');
  });

  it('refuses a link anywhere on the way: the output directory swapped for a link to /proc/self', async () => {
    const { root, out } = await workdir();
    await rm(out, { recursive: true });
    await symlink('/proc/self', out);
    // /proc/self/environ would be a regular file: only the directory check stands in the way.
    const e = refusal(() => readBeneath(root, ['cards', 'c1', 'out', 'environ'], MAX));
    expect(e.rule).toBe('link');
    expect(e.message).toContain('is under out, which is a symbolic link');
  });

  it('refuses a link higher up too (cards/ → elsewhere)', async () => {
    const { root } = await workdir();
    const elsewhere = await mkdtemp(join(tmpdir(), 'lanes-read-beneath-elsewhere-'));
    dirs.push(elsewhere);
    await mkdir(join(elsewhere, 'c1', 'out'), { recursive: true });
    await writeFile(join(elsewhere, 'c1', 'out', 'result.json'), '{}');
    await rm(join(root, 'cards'), { recursive: true });
    await symlink(elsewhere, join(root, 'cards'));
    expect(refusal(() => readBeneath(root, RESULT, MAX)).message).toContain('under cards, which is a symbolic link');
  });

  it('refuses a file over the cap with both sizes, before reading it', async () => {
    const { root, out } = await workdir();
    await writeFile(join(out, 'result.json'), Buffer.alloc(MAX + 1, 'a'));
    const e = refusal(() => readBeneath(root, RESULT, MAX));
    expect(e.rule).toBe('too-large');
    expect(e.message).toBe('result.json is 1,025 bytes (limit 1,024 bytes)');
  });

  it('refuses a directory, a socket and a character device', async () => {
    const { root, out } = await workdir();
    await mkdir(join(out, 'result.json'));
    expect(refusal(() => readBeneath(root, RESULT, MAX)).message).toBe('result.json is a directory, not a regular file');
    await rm(join(out, 'result.json'), { recursive: true });
    const server = createServer();
    servers.push(server);
    await new Promise<void>((resolve) => server.listen(join(out, 'result.json'), resolve));
    expect(refusal(() => readBeneath(root, RESULT, MAX)).message).toBe('result.json is a socket, not a regular file');
    const devDir = await workdir();
    // A device node needs mknod (root); where it is refused, the link cases above cover /dev/zero.
    try {
      execFileSync('mknod', [join(devDir.out, 'result.json'), 'c', '1', '5'], { stdio: 'ignore' });
    } catch {
      return;
    }
    expect(refusal(() => readBeneath(devDir.root, RESULT, MAX)).message).toBe('result.json is a character device, not a regular file');
    const blockDir = await workdir();
    execFileSync('mknod', [join(blockDir.out, 'result.json'), 'b', '7', '0'], { stdio: 'ignore' });
    expect(refusal(() => readBeneath(blockDir.root, RESULT, MAX)).message).toBe('result.json is a block device, not a regular file');
  });

  it('refuses a file under something that is not a directory (out/ swapped for a file)', async () => {
    const { root, out } = await workdir();
    await rm(out, { recursive: true });
    await writeFile(out, 'a file where a directory was');
    const e = refusal(() => readBeneath(root, RESULT, MAX));
    expect([e.rule, e.message]).toEqual(['not-regular', 'result.json is under out, which is not a directory']);
  });

  it('refuses a hard link: a file the agent did not write itself', async () => {
    const { root, out } = await workdir();
    const other = join(root, 'secret.conf');
    await writeFile(other, 'token=abc');
    await link(other, join(out, 'result.json'));
    const e = refusal(() => readBeneath(root, RESULT, MAX));
    expect(e.rule).toBe('hard-link');
    expect(e.message).toBe('result.json has 2 hard links; lanes reads only a file with one');
  });

  it('refuses a path that is not below the root', () => {
    expect(() => readBeneath('/tmp', ['..', 'etc', 'passwd'], MAX)).toThrow(RangeError);
    expect(() => readBeneath('/tmp', [], MAX)).toThrow(RangeError);
  });
});
